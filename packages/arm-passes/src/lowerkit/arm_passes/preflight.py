"""Pre-flight checks of an Ethos-U lowering: channel counts that waste MACs, memory budgets, ops off the NPU.

Memory figures are Vela's (``npu_report``); channel counts are read from the lowered
program's convolution and linear weights; the channel granularity is Vela's output
micro-block depth for the target: Vela's Python tables for Ethos-U55 / U65
(``ArchitectureFeatures.accelerator_configs``), and for Ethos-U85, which Vela models in its C++
core (regor), the table below.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lowerkit.arm_passes.errors import ArmLoweringError
from lowerkit.arm_passes.npu_report import NpuReport

__all__ = ["BudgetExceededError", "ChannelWarning", "channel_granularity", "channel_warnings", "check_budgets"]

#: Ethos-U85 output channel granularity per MAC configuration: the shallowest OFM micro-block
#: Vela may pick for a convolution / fully connected layer with 8- or 16-bit input. Source:
#: ethos-u-vela 5.1.0, ethosu/regor/architecture/ethosu85/ethos_u85.cpp, ``s_EthosU85Configs``
#: (each configuration's ``ofmUBlocks``: 128: 1x2x8, 1x1x16; 256: 1x2x16, 1x4x8, 2x2x8;
#: 512: 2x2x16, 1x4x16; 1024: 2x2x32, 1x4x32, 2x4x16; 2048: 2x2x64, 1x4x64, 4x4x16) and
#: ``ArchEthosU85::SetupOfmUBlockToOpTable`` (which of them take `conv` / `vectorprod`: on 128 and
#: 256 the 16-deep blocks only for depthwise, pooling and 1x1 depth-first convolutions). The
#: wheel ships regor compiled; Vela 5.1.0's ``--verbose-schedule`` prints the block it chose
#: ("OFM UBlock=[h, w, depth]"), which tests/arm_passes_tests/test_preflight.py checks.
U85_CHANNEL_GRANULARITY: dict[int, int] = {128: 8, 256: 8, 512: 16, 1024: 16, 2048: 16}
#: Warn when padding to the granularity adds at least this share of work to a layer.
WASTE_THRESHOLD = 0.2


class BudgetExceededError(ArmLoweringError):
    """The program needs more SRAM or flash than the user's budget; the message says what to change."""


@dataclass(frozen=True)
class ChannelWarning:
    """A convolution or linear layer whose channel count is just past a multiple of the granularity."""

    #: The layers (node names) with this op and channel count.
    layers: tuple[str, ...]
    op: str
    channels: int
    granularity: int

    @property
    def computed(self) -> int:
        """Channels the NPU computes (rounded up to the granularity)."""
        return math.ceil(self.channels / self.granularity) * self.granularity

    @property
    def suggested(self) -> int:
        """The multiple of the granularity just below."""
        return max(self.granularity, self.channels // self.granularity * self.granularity)

    def message(self, target: str) -> str:
        """One line with the fix."""
        saving = 1 - self.suggested / self.computed
        names = ", ".join(self.layers[:3]) + (", ..." if len(self.layers) > 3 else "")
        which = f"{self.op} '{names}'" if len(self.layers) == 1 else f"{len(self.layers)} {self.op} layers ({names})"
        return (
            f"{which} {'has' if len(self.layers) == 1 else 'have'} {self.channels} output channels: "
            f"{target} computes them in groups "
            f"of {self.granularity}, so it does the work of {self.computed}; {self.suggested} channels would cut "
            f"that layer's MACs by {saving:.0%} (or {self.computed} would use them all)"
        )


def channel_granularity(target: str) -> int:
    """Output channels the target's MAC array computes at once (Vela's OFM micro-block depth)."""
    if not target.startswith("ethos-u"):
        raise ArmLoweringError(f"channel granularity is an Ethos-U (Vela) figure; {target} has none")
    if target.startswith("ethos-u85-"):
        return U85_CHANNEL_GRANULARITY[int(target.removeprefix("ethos-u85-"))]
    from ethosu.vela.architecture_features import (
        Accelerator,
        ArchitectureFeatures,
    )

    depth: int = ArchitectureFeatures.accelerator_configs[Accelerator(target)].ofm_ublock.depth
    return depth


_WEIGHTED_OPS = {"conv2d": "conv2d", "convolution": "conv2d", "linear": "linear"}


def _layers(program: Any) -> list[tuple[str, str, int]]:
    """(node name, op, output channels) of each conv / linear in an exported program, but the last.

    The last one is the model's head: its channel count is the task's (classes), not a choice.
    """
    found = []
    for node in program.graph_module.graph.nodes:
        if node.op != "call_function":
            continue
        op = _WEIGHTED_OPS.get(getattr(node.target, "__name__", "").split(".")[0])
        if op is None or len(node.args) < 2:
            continue
        weight = getattr(node.args[1], "meta", {}).get("val")
        if weight is None or weight.dim() < 2:
            continue
        found.append((node.name, op, int(weight.shape[0])))
    return found[:-1]


def channel_warnings(program: Any, target: str) -> list[ChannelWarning]:
    """Layers whose output channels round up to the target's granularity with WASTE_THRESHOLD or more extra work."""
    granularity = channel_granularity(target)
    grouped: dict[tuple[str, int], list[str]] = {}
    for name, op, channels in _layers(program):
        computed = math.ceil(channels / granularity) * granularity
        if channels > granularity and computed / channels - 1 >= WASTE_THRESHOLD:
            grouped.setdefault((op, channels), []).append(name)
    return [ChannelWarning(tuple(names), op, channels, granularity) for (op, channels), names in grouped.items()]


def _kib(value: int) -> str:
    return f"{value / 1024:.1f} KiB"


def check_budgets(reports: Sequence[NpuReport], *, sram_budget: int | None, flash_budget: int | None) -> None:
    """Raise BudgetExceededError (one line) when Vela's SRAM or flash use passes the budget (bytes)."""
    sram = sum(r.sram_bytes for r in reports)
    if sram_budget is not None and sram > sram_budget:
        layers = [layer for r in reports for layer in r.layers]
        peak = max(layers, key=lambda layer: layer.staging_bytes, default=None)
        where = (
            f"largest tensor: {_kib(peak.staging_bytes)} staged at {peak.name} ({peak.tosa_op})"
            if peak is not None
            else "no per-layer data"
        )
        raise BudgetExceededError(
            f"needs {_kib(sram)} of SRAM, budget {_kib(sram_budget)}; {where}; "
            "shrink that layer's activations (input size, channels) or raise --sram-budget"
        )
    flash = sum(r.flash_bytes for r in reports)
    if flash_budget is not None and flash > flash_budget:
        encoded = sum(r.encoded_weight_bytes for r in reports)
        raise BudgetExceededError(
            f"needs {_kib(flash)} of flash, budget {_kib(flash_budget)}; largest part: NPU-encoded weights "
            f"{_kib(encoded)}; use fewer or smaller layers or raise --flash-budget"
        )
