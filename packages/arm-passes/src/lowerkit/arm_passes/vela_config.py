"""Vela configuration files: where one is, which system configs and memory modes it defines.

Vela reads a config name such as ``Arm/vela.ini`` from its own ``config_files`` folder and any
other name as a path (``ethosu.vela.vela.main``'s ``_parse_config``); this reads the same
files, with the same ``configparser``, to check names before a lowering starts.
"""

from __future__ import annotations

import configparser
import os
from dataclasses import dataclass
from pathlib import Path

from lowerkit.arm_passes.errors import ArmLoweringError

__all__ = [
    "DEFAULT_VELA_CONFIG",
    "VelaConfig",
    "check_vela_settings",
    "read_vela_config",
    "resolve_vela_config",
    "vela_flag",
]

#: The config file ExecuTorch's EthosUCompileSpec names by default.
DEFAULT_VELA_CONFIG = "Arm/vela.ini"

_SYSTEM_PREFIX = "System_Config."
_MEMORY_PREFIX = "Memory_Mode."


@dataclass(frozen=True)
class VelaConfig:
    """The system configs and memory modes one Vela config file defines."""

    path: Path
    system_configs: tuple[str, ...]
    memory_modes: tuple[str, ...]
    #: Each memory mode's ``arena_cache_size`` in bytes, where the file sets one (with inheritance).
    arena_cache_sizes: dict[str, int]


def resolve_vela_config(config: str | os.PathLike[str] | None) -> Path:
    """The file Vela reads for `config` (None: the default); ArmLoweringError when there is none."""
    name = os.fspath(config) if config is not None else DEFAULT_VELA_CONFIG
    normal = os.path.normpath(name)
    if os.path.splitext(normal)[1] != ".ini":
        raise ArmLoweringError(f"Vela config '{name}' must be a .ini file (Vela reads only those)")
    from ethosu.vela import architecture_features

    # Vela's rule: a relative two-part name ("Arm/vela.ini") is in its own config folder.
    in_vela_folder = (
        len(normal.split(os.path.sep)) == 2 and not name.startswith((".", os.path.sep, "~"))
    )
    if in_vela_folder:
        bundled = Path(architecture_features.CONFIG_FILES_PATH) / normal
        if bundled.is_file():
            return bundled
        if Path(name).is_file():
            raise ArmLoweringError(
                f"Vela config '{name}': Vela reads two-part names from its own config folder; write './{name}'"
            )
    elif Path(name).is_file():
        return Path(name)
    raise ArmLoweringError(f"Vela config file '{name}' does not exist; give the path of a vela.ini")


def read_vela_config(config: str | os.PathLike[str] | None) -> VelaConfig:
    """The system configs and memory modes of a Vela config file (None: Vela's Arm/vela.ini)."""
    path = resolve_vela_config(config)
    parser = configparser.ConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error as error:
        raise ArmLoweringError(f"Vela config '{path}' is not a valid .ini file: {error.message}") from None
    systems = tuple(s.removeprefix(_SYSTEM_PREFIX) for s in parser.sections() if s.startswith(_SYSTEM_PREFIX))
    modes = tuple(s.removeprefix(_MEMORY_PREFIX) for s in parser.sections() if s.startswith(_MEMORY_PREFIX))
    sizes = {}
    for mode in modes:
        size = _inherited(parser, _MEMORY_PREFIX + mode, "arena_cache_size")
        if size is not None:
            sizes[mode] = int(float(size))
    return VelaConfig(path, systems, modes, sizes)


def _inherited(parser: configparser.ConfigParser, section: str, key: str) -> str | None:
    seen: set[str] = set()
    while section in parser and section not in seen:
        seen.add(section)
        if key in parser[section]:
            return parser[section][key]
        section = parser[section].get("inherit", "")
    return None


def check_vela_settings(
    target: str,
    system_config: str | None,
    memory_mode: str | None,
    vela_config: str | os.PathLike[str] | None,
) -> VelaConfig:
    """Check that the config file exists and defines the named system config and memory mode."""
    config = read_vela_config(vela_config)
    if system_config is not None and system_config not in config.system_configs:
        raise ArmLoweringError(
            f"unknown system config '{system_config}' for {target}; {config.path} has: "
            f"{', '.join(config.system_configs) or 'none'}"
        )
    if memory_mode is not None and memory_mode not in config.memory_modes:
        raise ArmLoweringError(
            f"unknown memory mode '{memory_mode}' for {target}; {config.path} has: "
            f"{', '.join(config.memory_modes) or 'none'}"
        )
    return config


def vela_flag(flags: list[str], name: str) -> str | None:
    """The value of ``--name=value`` in a Vela command line (the last one), or None."""
    found = None
    for flag in flags:
        if flag.startswith(f"--{name}="):
            found = flag.split("=", 1)[1]
    return found
