"""Stock ExecuTorch's Arm lowering, written out here from ExecuTorch's public API, and shared lowerings.

``stock_pte`` lowers the way ExecuTorch's ``backends/arm/scripts/aot_arm_compiler.py`` does
(export, the Arm quantizer for the compile spec with the int8 or a16w8 config, calibrate,
``convert_pt2e``, export again, ``to_edge_transform_and_lower`` with the Arm partitioner,
``to_executorch``), with lowerkit's defaults where the script has flags (no extra Vela
flags, default edge and backend configs); nothing of lowerkit runs in it. The test files of
this folder run in one process (tests/BUILD), so each lowering is done once for all of them.
"""

from __future__ import annotations

import shutil
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

#: The smallest Arm zoo CNN, lowered for every target family.
MODEL = "ds_cnn"
CALIBRATION_BATCHES = 4
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


def stock_quantized(
    target: str,
    *,
    a16w8: bool = False,
    system_config: str | None = None,
    memory_mode: str | None = None,
    config_ini: str | None = None,
    model: str = MODEL,
) -> tuple[Any, Any]:
    """(compile spec, converted fake-quantized module) of stock ExecuTorch's pt2e flow for `target`."""
    import torch
    from executorch.backends.arm.ethosu import EthosUCompileSpec
    from executorch.backends.arm.quantizer import (
        EthosUQuantizer,
        TOSAQuantizer,
        get_symmetric_a16w8_quantization_config,
        get_symmetric_quantization_config,
    )
    from executorch.backends.arm.tosa import TosaSpecification
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from lowerkit import zoo

    entry = zoo.get(model)
    inputs = entry.example_inputs()
    spec: Any
    if target.startswith("ethos-u"):
        spec = EthosUCompileSpec(
            target, system_config=system_config, memory_mode=memory_mode,
            config_ini=config_ini if config_ini is not None else "Arm/vela.ini",
        )
        quantizer: Any = EthosUQuantizer(spec)
    else:
        spec = TosaCompileSpec(TosaSpecification.create_from_string(target))
        quantizer = TOSAQuantizer(spec)
    quantizer.set_global(
        get_symmetric_a16w8_quantization_config() if a16w8 else get_symmetric_quantization_config()
    )
    prepared = prepare_pt2e(torch.export.export(entry.module(), inputs).module(check_guards=False), quantizer)
    with torch.no_grad():
        for batch in entry.calibration(CALIBRATION_BATCHES, 0):
            prepared(*batch)
    return spec, convert_pt2e(prepared)


def stock_pte(target: str, *, model: str = MODEL, **settings: Any) -> bytes:
    """The .pte bytes of stock ExecuTorch's lowering of a zoo model for `target`."""
    import torch
    from executorch.backends.arm.ethosu import EthosUPartitioner
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from executorch.exir import to_edge_transform_and_lower

    from lowerkit import zoo

    spec, converted = stock_quantized(target, model=model, **settings)
    program = torch.export.export(converted, zoo.get(model).example_inputs())
    # As aot_arm_compiler: the partitioner is made after quantizing (the quantizer sets the
    # compile spec's pass-pipeline config, which the partitioner copies).
    partitioner = EthosUPartitioner(spec) if target.startswith("ethos-u") else TOSAPartitioner(spec)
    edge = to_edge_transform_and_lower(program, partitioner=[partitioner])
    return bytes(edge.to_executorch().buffer)


@cache
def lowerkit_lowering(target: str, a16w8: bool = False, system_config: str | None = None,
                      memory_mode: str | None = None, vela_config: str | None = None,
                      model: str = MODEL) -> Any:
    """lowerkit's accelerated lower_to_arm of a zoo model, same calibration (cached per process)."""
    from lowerkit import zoo
    from lowerkit.arm_passes import lower_to_arm

    entry = zoo.get(model)
    return lower_to_arm(
        entry.module(), entry.example_inputs(), target,
        calibration=entry.calibration(CALIBRATION_BATCHES, 0),
        a16w8=a16w8, system_config=system_config, memory_mode=memory_mode, vela_config=vela_config,
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
