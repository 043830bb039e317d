"""STACK_TRACES: the Arm passes' provenance line, read from the two innermost frames instead of all.

ExecuTorch's Arm passes note where they made a node: ``create_node`` (``arm_pass_utils``) and
``ArmPass.call_operator`` (with ``updated=True``) append ``traceback.format_stack()[-2]`` to the
node's ``stack_trace``. ``format_stack`` extracts and formats every frame of the stack (60 and more
inside a lowering, each file re-checked on disk by ``linecache``) to keep one: 5-6% of a DeiT-tiny
TOSA INT ``to_edge_transform_and_lower``.

While the patch is installed, each of those modules' ``traceback`` is `_StackTraceFormatter`, whose
``format_stack`` gives a thread inside a scope the last two entries of stock's list, computed from
the frames they come from (`innermost_entries`): the same strings, so the same metadata. Every
other call, and every other attribute of the module, is stock's.
"""

from __future__ import annotations

import sys
import traceback
from types import FrameType, ModuleType
from typing import Any

from executorch.backends.arm._passes import arm_pass, arm_pass_utils  # private modules

from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["STACK_TRACES", "STACK_TRACE_USERS", "innermost_entries"]

#: The upstream modules whose ``traceback`` is replaced -> the one function that uses it there
#: (``format_stack()[-2]``); their source hashes guard the replacement.
STACK_TRACE_USERS: dict[ModuleType, str] = {
    arm_pass_utils: "create_node",
    arm_pass: "ArmPass.call_operator",
}


def _key(frame: FrameType) -> tuple[str, int | None, str]:
    """What ``StackSummary.format`` compares to fold a repeated line: file, line number, name."""
    return frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name


def innermost_entries(frame: FrameType) -> list[str]:
    """The entries ``traceback.format_stack(frame)`` ends with: at least its last two, exactly.

    ``StackSummary.format`` folds a run of frames with the same file, line and name (its first
    three shown, then "[Previous line repeated n more times]"), and a run's entries depend on that
    run alone. So the two innermost runs, extracted and formatted as stock does, end with the same
    two entries as the whole stack's list (or are all of it: then the list is the same).
    """
    frames: list[FrameType] = []
    runs = 0
    previous: tuple[str, int | None, str] | None = None
    walked: FrameType | None = frame
    while walked is not None:
        key = _key(walked)
        if key != previous:
            runs += 1
            if runs > 2:
                break
            previous = key
        frames.append(walked)
        walked = walked.f_back
    summary = traceback.StackSummary.extract((f, f.f_lineno) for f in frames)
    summary.reverse()
    return traceback.format_list(summary)


class _StackTraceFormatter:
    """Stands in for the ``traceback`` module in `STACK_TRACE_USERS` (whose only use is
    ``traceback.format_stack()[-2]``).

    ``format_stack()`` with no arguments, in a thread inside a `STACK_TRACES` scope and with no
    ``sys.tracebacklimit`` set, gives `innermost_entries` of the caller's frame; any other call
    (other threads, arguments, a limit) and every other attribute are the real module's, so the
    stand-in is neutral for threads outside a scope.
    """

    def __getattr__(self, name: str) -> Any:
        return getattr(traceback, name)

    @staticmethod
    def format_stack(f: FrameType | None = None, limit: int | None = None) -> list[str]:
        caller = sys._getframe(1) if f is None else f
        if f is not None or limit is not None or hasattr(sys, "tracebacklimit") or not STACK_TRACES.active():
            return traceback.format_stack(caller, limit)
        return innermost_entries(caller)


_FORMATTER = _StackTraceFormatter()

#: Held by ``accelerated_arm_pipeline()`` and ``accelerated_arm_quantization()``.
STACK_TRACES = Patch(
    "lowerkit.arm_passes._upstream_stack_traces",
    lambda: [Replacement(module, "traceback", _FORMATTER, dispatch=False) for module in STACK_TRACE_USERS],
)
