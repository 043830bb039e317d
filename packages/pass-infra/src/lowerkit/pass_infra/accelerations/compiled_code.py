"""torch.fx compiles each distinct generated source once, not on every recompile.

``GraphModule.recompile()`` generates a graph's Python source and compiles it
(``torch.fx.graph_module._exec_with_source``). A lowering recompiles the same graph again and
again: ``ExportedProgram`` construction, deep copies, pass managers' checks, passes that changed
nothing. On MobileNetV2's TOSA INT lowering 320 of 359 compiles were of a source already
compiled; on DeiT-tiny compiling was ~4.5 s, the sources being thousands of lines.

Inside `COMPILED_CODE`, ``_exec_with_source`` registers the source with torch's loader as stock
does (a new key, the same linecache entry) and takes the code object from a cache of sources
compiled in this scope, renamed to that key: the very code object ``compile()`` would give
(same bytecode, constants, names, line table and file name). The cache holds at most
`CACHED_SOURCES` sources and is emptied when the last scope closes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from types import CodeType
from typing import Any

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["CACHED_SOURCES", "COMPILED_CODE", "compiled"]

#: The most generated sources kept compiled at once (the least recently used go first).
CACHED_SOURCES = 64

_codes: OrderedDict[str, CodeType] = OrderedDict()
_lock = threading.Lock()


def _renamed(code: CodeType, filename: str) -> CodeType:
    """`code`, and every code object nested in it, with ``co_filename`` `filename`."""
    consts = tuple(_renamed(c, filename) if isinstance(c, CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def compiled(src: str, filename: str) -> CodeType:
    """``compile(src, filename, "exec", dont_inherit=True)``, compiling each distinct `src` once."""
    with _lock:
        code = _codes.get(src)
        if code is not None:
            _codes.move_to_end(src)
    if code is None:
        code = compile(src, filename, "exec", dont_inherit=True)
        with _lock:
            _codes[src] = code
            while len(_codes) > CACHED_SOURCES:
                _codes.popitem(last=False)
    elif code.co_filename != filename:
        code = _renamed(code, filename)
    return code


def _exec_with_source(src: str, globals: dict[str, Any], co_fields: dict[str, Any] | None = None) -> None:
    """torch's ``_exec_with_source``, its ``compile()`` served by `compiled`."""
    key = _upstream.fx_code_loader().cache(src, globals, co_fields)
    exec(compiled(src, key), globals)


def _forget() -> None:
    with _lock:
        _codes.clear()


def _replacements() -> list[Replacement]:
    return [Replacement(_upstream.fx_graph_module_module(), "_exec_with_source", _exec_with_source)]


#: Held by ``accelerated_lowering()`` and ``accelerated_quantization()``.
COMPILED_CODE = Patch("lowerkit.pass_infra.accelerations.compiled_code", _replacements, on_uninstall=[_forget])
