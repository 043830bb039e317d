"""Embedding tables under linear weight quantization: tied tables, exempt gathers, opt-in tables.

ExecuTorch 1.5.1 opts every ``gather`` out of ``op_linear_quantizer_config`` (embedding tables
stay float) except gathers whose table is also another op's weight (a tied embedding): those get
the global config, or coremltools rejects the conflicting configs of the shared constant. lowerkit
keeps that and adds what its review asked for: nested blocks are scanned, gathers of non-float
tables stay exempt (``index_select`` lowers to ``gather`` too), the tied gathers are logged, and
``quantize_embedding_tables=True`` quantizes every float table.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmbeddingTables:
    """Gathers of a MIL program sorted by what linear weight quantization should do with them."""

    #: Gathers whose float table is also consumed by an op of another type (tied tables).
    tied: tuple[str, ...]
    #: Gathers whose float table only gathers read (plain embedding tables).
    untied: tuple[str, ...]
    #: Gathers whose table is not float (never quantized).
    non_float: tuple[str, ...]
    #: Non-float constants shared by a gather and another op: pinned unquantized by name.
    non_float_shared_consts: tuple[str, ...]


def _operations(block: Any) -> Iterator[Any]:
    for op in block.operations:
        yield op
        for nested in getattr(op, "blocks", ()):
            yield from _operations(nested)


def _is_float(var: Any) -> bool:
    from coremltools.converters.mil.mil import types

    dtype = getattr(var, "dtype", None)
    return dtype is not None and bool(types.is_float(dtype))


def find_embedding_tables(program: Any) -> EmbeddingTables:
    """Classify the program's gathers by the constant table they read (all blocks, nested too)."""
    consumers: dict[int, tuple[Any, list[Any]]] = {}
    for function in program.functions.values():
        for op in _operations(function):
            for value in op.inputs.values():
                for var in value if isinstance(value, (list, tuple)) else [value]:
                    source = getattr(var, "op", None)
                    if source is not None and source.op_type == "const":
                        entry = consumers.setdefault(id(var), (var, []))
                        if op not in entry[1]:
                            entry[1].append(op)
    tied: list[str] = []
    untied: list[str] = []
    non_float: list[str] = []
    pinned: list[str] = []
    for var, ops in consumers.values():
        gathers = [op for op in ops if op.op_type == "gather" and op.inputs.get("x") is var]
        if not gathers:
            continue
        shared = len(gathers) < len(ops)
        names = [op.name for op in gathers]
        if not _is_float(var):
            non_float += names
            if shared:
                pinned.append(var.op.name)
        elif shared:
            tied += names
        else:
            untied += names
    return EmbeddingTables(tuple(tied), tuple(untied), tuple(non_float), tuple(pinned))


def optimization_config(
    program: Any, quantizer_config: Any, *, quantize_embedding_tables: bool
) -> Any:
    """The ``cto.coreml.OptimizationConfig`` for ``linear_quantize_weights`` on this program."""
    import coremltools.optimize as cto

    tables = find_embedding_tables(program) if program is not None else EmbeddingTables((), (), (), ())
    if tables.tied:
        logger.info(
            "tied embedding tables: gathers %s share their table with another op's weight; "
            "quantizing those tables with op_linear_quantizer_config",
            list(tables.tied),
        )
    op_name_configs: dict[str, Any] = {}
    if quantize_embedding_tables:
        op_type_configs: dict[str, Any] = {}
        if tables.untied or tables.tied:
            logger.info(
                "quantize_embedding_tables: quantizing the tables of gathers %s",
                list(tables.tied + tables.untied),
            )
    else:
        op_type_configs = {"gather": None}
        op_name_configs.update({name: quantizer_config for name in tables.tied})
    op_name_configs.update({name: None for name in tables.non_float})
    op_name_configs.update({name: None for name in tables.non_float_shared_consts})
    return cto.coreml.OptimizationConfig(
        global_config=quantizer_config,
        op_type_configs=op_type_configs,
        op_name_configs=op_name_configs,
    )
