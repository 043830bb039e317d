"""The one place this package reaches into third-party private names."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any


def deserialize_pte(data: bytes) -> Any:
    """ExecuTorch's own .pte reader: a PTEFile whose `.program` is an `exir.schema.Program`.

    `lowerkit inspect` reads .pte files with `pte_file` (no torch import); the tests check
    that reader against this one.
    """
    from executorch.exir._serialize._program import deserialize_pte_binary

    return deserialize_pte_binary(data)


#: ExecuTorch's LlmConfig module, and the name `llm_config_module` loads it under when that is not imported.
_LLM_CONFIG = "executorch.extension.llm.export.config.llm_config"
_LLM_CONFIG_ALONE = "lowerkit.cli._executorch_llm_config"


def llm_config_module() -> ModuleType:
    """ExecuTorch's ``LlmConfig`` module, without the torch its package imports.

    The module needs only the standard library, but ``executorch.extension.llm.export``'s
    ``__init__`` imports torch and torchao (about 13 s here). Unless ExecuTorch's own is imported
    already, the file is loaded on its own, under another name: its classes are then not
    ExecuTorch's (``export_llama`` takes only its own; `lowerkit.cli.llm` converts before it exports).
    """
    loaded = sys.modules.get(_LLM_CONFIG) or sys.modules.get(_LLM_CONFIG_ALONE)
    if loaded is not None:
        return loaded
    found = importlib.util.find_spec("executorch")
    roots = list(found.submodule_search_locations or ()) if found is not None else []
    path = next((Path(r) / "extension/llm/export/config/llm_config.py" for r in roots), None)
    if path is None or not path.is_file():
        return importlib.import_module(_LLM_CONFIG)
    spec = importlib.util.spec_from_file_location(_LLM_CONFIG_ALONE, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[_LLM_CONFIG_ALONE] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module
