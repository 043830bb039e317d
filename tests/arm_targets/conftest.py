"""Shared lowerings of the smallest Arm zoo CNN for every target family: stock and lowerkit's.

Stock is ExecuTorch's public API only, as ExecuTorch's ``backends/arm/scripts/aot_arm_compiler.py``
lowers (golden.arm.stock_case, over `bench.realworld_flows.arm_public_api`: export, the Arm
quantizer for the compile spec with the int8 or a16w8 config, calibrate, ``convert_pt2e``,
export again, ``to_edge_transform_and_lower`` with the Arm partitioner, ``to_executorch``), with
lowerkit's defaults where the script has flags (no extra Vela flags, default edge and backend
configs); nothing of lowerkit runs in it. The test files of this folder run in one process
(tests/BUILD), so each lowering is done once for all of them.
"""

from __future__ import annotations

import shutil
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from golden.arm import lowering_case, stock_case

#: The smallest Arm zoo CNN, lowered for every target family.
MODEL = "ds_cnn"
#: The system config and memory mode board_ini() adds to Vela's own Arm/vela.ini.
BOARD_SYSTEM_CONFIG = "Board_U65_Slow_Dram"
BOARD_MEMORY_MODE = "Board_Sram_128KB"


@cache
def board_ini() -> str:
    """A user's Vela config: Vela's Arm/vela.ini plus a system config and a memory mode of its own."""
    from ethosu.vela import architecture_features

    source = Path(architecture_features.CONFIG_FILES_PATH) / "Arm" / "vela.ini"
    target = Path(tempfile.mkdtemp(prefix="lowerkit-vela-")) / "board.ini"
    shutil.copyfile(source, target)
    with target.open("a") as file:
        file.write(
            f"\n[System_Config.{BOARD_SYSTEM_CONFIG}]\ninherit=System_Config.Ethos_U65_Mid_End\n"
            "Dram_clock_scale=0.5\n"
            f"\n[Memory_Mode.{BOARD_MEMORY_MODE}]\ninherit=Memory_Mode.Dedicated_Sram\narena_cache_size=131072\n"
        )
    return str(target)


def stock_pte(target: str, **settings: Any) -> bytes:
    """The .pte bytes of stock ExecuTorch's lowering of `MODEL` for `target` (`arm_stock`'s `settings`)."""
    return stock_case(MODEL, target, **settings).pte


@cache
def lowerkit_lowering(target: str, a16w8: bool = False, system_config: str | None = None,
                      memory_mode: str | None = None, vela_config: str | None = None) -> Any:
    """lowerkit's accelerated lower_to_arm of `MODEL`, on stock's calibration (cached per process)."""
    return lowering_case(
        MODEL, target, a16w8=a16w8, system_config=system_config, memory_mode=memory_mode, vela_config=vela_config
    )


def run_cli(capsys: Any, *args: str) -> tuple[int, str, str]:
    """Run `lowerkit ARGS` in-process: (exit code, stdout, stderr)."""
    import pytest

    from lowerkit.cli import run

    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        run(list(args))
    captured = capsys.readouterr()
    code = exit_info.value.code
    return (code if isinstance(code, int) else 1), captured.out, captured.err
