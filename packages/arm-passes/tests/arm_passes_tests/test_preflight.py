"""The channel granularity preflight uses is the OFM micro-block depth the installed Vela picks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from lowerkit.arm_passes import ArmLoweringError, lower_to_arm
from lowerkit.arm_passes.preflight import U85_CHANNEL_GRANULARITY, channel_granularity

#: 40 output channels: a whole number of every micro-block depth 8 or 16, not of 32 or 64, so Vela's
#: least-waste choice (regor ``ArchEthosU85::FindUBlock``) is the shallowest block a convolution may use.
CHANNELS = 40


class _Conv(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(8, CHANNELS, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


def _chosen_ublock_depth(target: str) -> int:
    lowering = lower_to_arm(_Conv().eval(), (torch.randn(1, 8, 8, 8),), target)
    flags = [f for f in lowering.compile_spec.compiler_flags if not f.startswith("--output-dir=")]
    with tempfile.TemporaryDirectory() as folder:
        network = Path(folder) / "conv.tosa"
        network.write_bytes(lowering.tosa_flatbuffers[0])
        # A subprocess: regor prints the schedule from C++, past Python's sys.stdout.
        ran = subprocess.run(
            [sys.executable, "-m", "ethosu.vela", *flags, "--verbose-schedule", f"--output-dir={folder}", str(network)],
            capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
    printed = ran.stdout + ran.stderr
    found = re.finditer(r"Operation Conv2D .*?OFM UBlock=\[\d+, \d+, (\d+)\]", printed, re.DOTALL)
    depths = {int(m.group(1)) for m in found}
    assert len(depths) == 1, printed
    return depths.pop()


@pytest.mark.parametrize("target", ["ethos-u85-128", "ethos-u85-1024"])
def test_u85_granularity_is_velas_micro_block_depth(target: str) -> None:
    assert channel_granularity(target) == _chosen_ublock_depth(target)


def test_u85_table_and_other_targets() -> None:
    assert channel_granularity("ethos-u85-256") == U85_CHANNEL_GRANULARITY[256] == 8
    assert channel_granularity("ethos-u85-2048") == 16
    assert channel_granularity("ethos-u55-32") == 4 and channel_granularity("ethos-u65-512") == 8
    with pytest.raises(ArmLoweringError, match="vgf-int has none"):
        channel_granularity("vgf-int")
