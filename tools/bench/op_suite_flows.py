"""pytest plugin: lowerkit flows for ExecuTorch's operator suite, without editing the suite.

Load it with ``-p bench.op_suite_flows`` when running ``executorch/backends/test/suite``.
It adds one lowerkit flow per stock flow it mirrors (`MIRRORED`):

- Arm, beside the stock flows: ``lowerkit_arm_tosa_int`` mirrors ``arm_tosa_int``, ...: the
  same tester, quantizer and stages, run inside ``lowerkit.arm_passes.accelerated_arm_pipeline()``.
- Core ML, with ``--lowerkit-coreml``: ``lowerkit_coreml`` / ``lowerkit_coreml_static_int8``
  mirror ``coreml`` / ``coreml_static_int8`` with lowerkit's quantizer and backend
  (`bench.op_suite_coreml`). They *replace* the stock Core ML flows in that process: lowerkit's
  Core ML backend refuses to share a process with ExecuTorch's, which the stock flow imports.
  Off macOS every Core ML flow, stock or lowerkit, stops after ``serialize`` (Core ML cannot
  execute there; the stock run stage fails every case), so both sides run the same stages.

With ``--lowerkit-suite-json FILE`` it writes one record per case (flow, case, outcome, the
suite's own quantize / lower times) for `bench.op_suite` to compare.

The flows are added by replacing ``executorch.backends.test.suite.flow.all_flows`` (and, with
``--lowerkit-coreml``, its ``_load_coreml``) through a pass-infra `Patch`, opened before the
suite's conftest imports it and closed at the end of the session.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.op_suite_coreml import (
    COREML_FLOWS,
    NO_COREML_RUNTIME,
    lowerkit_coreml_flows,
    without_run,
)

#: lowerkit Arm flow name -> the stock flow it mirrors.
ARM_MIRRORED = {"lowerkit_arm_tosa_int": "arm_tosa_int", "lowerkit_arm_tosa_fp": "arm_tosa_fp"}
#: lowerkit flow name -> the stock flow it mirrors.
MIRRORED = ARM_MIRRORED | {name: stock for name, (stock, _, _) in COREML_FLOWS.items()}

_state: dict[str, Any] = {"scope": None, "records": []}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--lowerkit-suite-json", default=None, help="Write per-case results here.")
    parser.addoption(
        "--lowerkit-coreml",
        action="store_true",
        help="Register lowerkit's Core ML flows instead of the stock ones (not both: one Core ML backend a process).",
    )


def _with_lowerkit_flows(stock_all_flows: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    def all_flows() -> dict[str, Any]:
        flows = dict(stock_all_flows())
        for name, mirrored in ARM_MIRRORED.items():
            if mirrored in flows:
                flows[name] = dataclasses.replace(flows[mirrored], name=name)
        if NO_COREML_RUNTIME:
            flows = {name: without_run(f) if f.backend == "coreml" else f for name, f in flows.items()}
        return flows

    return all_flows


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    from executorch.backends.test.suite import flow

    from lowerkit.pass_infra import Patch, Replacement

    replacements = [Replacement(flow, "all_flows", _with_lowerkit_flows(flow.all_flows))]
    if early_config.known_args_namespace.lowerkit_coreml:
        replacements.append(Replacement(flow, "_load_coreml", lowerkit_coreml_flows))
    patch = Patch("op-suite-lowerkit-flows", replacements)
    scope = patch.scope()
    scope.__enter__()
    _state["scope"] = scope


def pytest_unconfigure(config: pytest.Config) -> None:
    path = config.getoption("--lowerkit-suite-json")
    if path:
        Path(path).write_text(json.dumps(_state["records"], indent=1) + "\n")
    scope = _state.pop("scope", None)
    if scope is not None:
        scope.__exit__(None, None, None)


def case_name(nodeid: str, flow_name: str) -> str:
    """The test id without its flow parameter, so one case of two flows has one name."""
    base, bracket, params = nodeid.partition("[")
    if not bracket:
        return nodeid
    kept = [p for p in params.rstrip("]").split("-") if p != flow_name]
    return f"{base}[{'-'.join(kept)}]" if kept else base


def _flow_of(item: pytest.Item) -> Any:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("test_runner") if callspec is not None else None


@contextlib.contextmanager
def _lowerkit_scope(flow: Any) -> Iterator[None]:
    if flow is not None and flow.name in ARM_MIRRORED:
        from lowerkit.arm_passes import accelerated_arm_pipeline

        with accelerated_arm_pipeline():
            yield
    else:
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with _lowerkit_scope(_flow_of(item)):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    flow = _flow_of(item)
    if flow is None or not (report.when == "call" or (report.when == "setup" and report.outcome != "passed")):
        return
    runner = getattr(item, "funcargs", {}).get("test_runner")
    results = list(getattr(runner, "_results", []))
    _state["records"].append(
        {
            "flow": flow.name,
            "case": case_name(item.nodeid, flow.name),
            "outcome": report.outcome,
            "subtests": [r.result.to_short_str() for r in results],
            "errors": [f"{r.result.name}: {type(r.error).__name__}: {str(r.error)[:300]}" for r in results if r.error],
            "quantize_s": sum(r.quantize_time.total_seconds() for r in results if r.quantize_time),
            "lower_s": sum(r.lower_time.total_seconds() for r in results if r.lower_time),
            "duration_s": report.duration,
        }
    )
