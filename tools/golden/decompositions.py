"""Local decomposition vs torch's whole re-trace, on every run_decompositions of ExecuTorch's operator suite.

Runs the suite's lowerkit Arm flows (``bench.op_suite_flows``) with this module as a second pytest
plugin: every ``decompose_locally`` that gives a program (pass-infra's ``run_decompositions``
without the whole re-trace) is compared, in the same process, with torch's own re-trace of the
same input: graph code, node names, signature, module call graph, and each node's metadata keys
in order with ``original_aten``, ``seq_nr`` type, ``tensor_meta``, ``val`` signature, the
provenance root, and ``custom`` but for dynamo-disable markers (`CACHE_STATE_MARKERS`). Prints SAME / DIFFERENT counts, the cases that differ and how; exit 1 on any
difference.

    python -m golden.decompositions [--flows arm_tosa_int,arm_tosa_fp] [-k EXPR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

_checks: list[dict[str, Any]] = []
_state: dict[str, Any] = {"case": "", "scope": None}


def _root(sources: Any) -> Any:
    if not sources:
        return None
    source = sources[-1]
    while source.from_node:
        source = source.from_node[-1]
    return (source.name, source.target, source.pass_name, tuple(str(a) for a in source.action))


def _signature(value: Any) -> Any:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        stride = value.stride() if callable(value.stride) else value.stride  # tensor or TensorMetadata
        return (tuple(value.shape), value.dtype, tuple(stride))
    if isinstance(value, (list, tuple)):
        return tuple(_signature(v) for v in value)
    if isinstance(value, dict):
        return {k: _signature(v) for k, v in value.items()}
    return repr(value)


#: ``custom`` keys torch's dynamo-disable wrapper adds to the node being traced while a FakeTensor
#: kernel runs (``_refs.cat``'s, say). Whether they appear depends on FakeTensor's process-wide
#: dispatch cache, not on the program: a cache hit runs no kernel. ExecuTorch's own Arm INT
#: lowering of ``torch.stack`` gives ``cat`` none (its re-traces hit the cache), while a re-trace
#: of the same program with a cold cache gives them; lowerkit's small re-trace hits it too.
CACHE_STATE_MARKERS = ("_torchdynamo_disable", "_torchdynamo_disable_recursive", "_torchdynamo_disable_method")


def _custom(value: Any) -> str:
    return repr({k: v for k, v in value.items() if k not in CACHE_STATE_MARKERS})


def differences(stock: Any, local: Any) -> list[str]:
    """How `local` differs from torch's re-trace `stock` (empty: the same)."""
    out = []
    if stock.graph_module.code != local.graph_module.code:
        out.append("graph code")
    if str(stock.graph_signature) != str(local.graph_signature):
        out.append("signature")
    if str(stock.module_call_graph) != str(local.module_call_graph):
        out.append("module call graph")
    if len(stock.graph.nodes) != len(local.graph.nodes):
        return [*out, f"{len(stock.graph.nodes)} nodes vs {len(local.graph.nodes)}"]
    for a, b in zip(stock.graph.nodes, local.graph.nodes, strict=True):
        if a.name != b.name:
            out.append(f"name {a.name} vs {b.name}")
        if list(a.meta) != list(b.meta):
            out.append(f"{a.name}: keys {list(a.meta)} vs {list(b.meta)}")
            continue
        for key in a.meta:
            va, vb = a.meta[key], b.meta[key]
            if key == "from_node":
                same = _root(va) == _root(vb)
            elif key == "seq_nr":
                same = type(va) is type(vb)
            elif key in ("val", "eager_input_vals", "tensor_meta"):
                same = _signature(va) == _signature(vb)
            elif key == "custom":
                same = _custom(va) == _custom(vb)
            else:
                same = repr(va) == repr(vb)
            if not same:
                out.append(f"{a.name}: {key} {repr(va)[:150]} vs {repr(vb)[:150]}")
    return out[:5]


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    from lowerkit.pass_infra import Patch, Replacement, _upstream
    from lowerkit.pass_infra.accelerations import retrace_skip

    local = retrace_skip.decompose_locally

    def checked(program: Any, table: Any, decomposing: Any) -> Any:
        result = local(program, table, decomposing)
        if result is not None:
            stock = _upstream.STOCK_RUN_DECOMPOSITIONS(program, dict(table))
            _checks.append({"case": _state["case"], "differences": differences(stock, result)})
        return result

    scope = Patch("golden-decomposition-check", [Replacement(retrace_skip, "decompose_locally", checked, dispatch=False)]).scope()
    scope.__enter__()
    _state["scope"] = scope


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    _state["case"] = item.nodeid
    yield


def pytest_unconfigure(config: pytest.Config) -> None:
    path = os.environ.get("LOWERKIT_DECOMPOSITION_CHECKS")
    if path:
        Path(path).write_text(json.dumps(_checks, indent=1) + "\n")
    scope = _state.pop("scope", None)
    if scope is not None:
        scope.__exit__(None, None, None)


def main(argv: list[str] | None = None) -> int:
    from bench.op_suite import suite_dir

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flows", default="arm_tosa_int,arm_tosa_fp", help="Stock Arm flows whose lowerkit mirrors run.")
    parser.add_argument("-k", dest="selection", default=None)
    args = parser.parse_args(argv)
    markers = " or ".join(f"flow_lowerkit_{flow}" for flow in args.flows.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "checks.json"
        command = [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "bench.op_suite_flows",
            "-p", "golden.decompositions", "--rootdir", str(suite_dir().parent), str(suite_dir()),
            "-m", markers, "-W", "ignore",
        ]
        if args.selection:
            command += ["-k", args.selection]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
               "LOWERKIT_DECOMPOSITION_CHECKS": str(record)}
        done = subprocess.run(command, capture_output=True, text=True, cwd=tmp, env=env)
        if not record.exists():
            raise SystemExit(f"pytest wrote no checks (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        checks = json.loads(record.read_text())
    different = [c for c in checks if c["differences"]]
    cases = {c["case"] for c in checks}
    print(f"{len(checks)} local decompositions in {len(cases)} cases: "
          f"{len(checks) - len(different)} SAME, {len(different)} DIFFERENT")
    print(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "")
    for check in different[:40]:
        print(f"  DIFFERENT {check['case']}: {'; '.join(check['differences'])}")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
