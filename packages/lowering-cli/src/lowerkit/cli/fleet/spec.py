"""FLEET.toml: the lowerings of a fleet, checked before anything runs (errors name the line).

    [defaults]                      # optional, for every [[lower]] below
    verify = true
    [[lower]]
    model = "zoo:resnet8"           # zoo:NAME, et:NAME, hf:DIR, tv:NAME, FILE.pt2 or package.module:factory
    targets = ["coreml-int8", "tosa-int"]
    calibration = "calib/resnet8"   # optional, relative to FLEET.toml
    coreml_passes = ["common::dead_code_elimination"]   # optional, Core ML targets
    weights = "resnet8.safetensors" # optional, relative to FLEET.toml; and task, random_weights,
                                    # sequence_length, image_size as the `lower` options say

A backend's option is a key too where its `TargetOption` says `fleet` (`--sram-budget` is
`sram_budget`; a path is relative to FLEET.toml), refused for a target that does not take it.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lowerkit.cli import targets
from lowerkit.cli.backend import TargetOption, is_given
from lowerkit.cli.errors import UsageError
from lowerkit.cli.sources.options import DEFAULT, TASKS, SourceOptions

#: The keys of every [[lower]], and their TOML types (and the backends' `fleet_keys`).
COMMON_KEYS = {
    "model": str, "targets": list, "calibration": str, "verify": bool,
    "weights": str, "task": str, "random_weights": bool, "sequence_length": int, "image_size": int,
}


def fleet_keys() -> dict[str, TargetOption]:
    """The backends' options FLEET.toml takes, by key (`TargetOption.fleet`)."""
    return {option.fleet_key: option for option in targets.OPTIONS.values() if option.fleet and option.command == "lower"}


def _fleet_type(option: TargetOption) -> type:
    if option.fleet_list is not None:
        return list
    return bool if option.kind == "flag" else str


def keys() -> dict[str, type]:
    """Every key a [[lower]] takes, and its TOML type."""
    return {**COMMON_KEYS, **{key: _fleet_type(option) for key, option in fleet_keys().items()}}
_HEADER = re.compile(r"^\s*\[\[\s*lower\s*\]\]")


@dataclass(frozen=True)
class Job:
    """One lowering of the fleet."""

    index: int
    model: str
    target: str
    calibration: Path | None
    verify: bool
    #: How the model is built (weights file, task, random weights, input sizes).
    source: SourceOptions = DEFAULT
    #: The backend options given, by flag, as `targets.check_options` takes them.
    given: tuple[tuple[str, Any], ...] = ()

    @property
    def output_name(self) -> str:
        """The .pte file name in the output folder: MODEL.TARGET.pte."""
        stem = self.model.removeprefix("zoo:")
        stem = Path(stem).stem if stem.endswith(".pt2") else stem
        return f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', stem)}.{self.target}.pte"


def load(path: Path) -> list[Job]:
    """The jobs of FLEET.toml at `path`, in file order; a UsageError names the line of a mistake."""
    try:
        text = path.read_text()
    except OSError as error:
        raise UsageError(f"cannot read fleet file '{path}': {error.strerror or error}") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        found = re.search(r"at line (\d+)", str(error))
        line = int(found[1]) if found else max(len(text.splitlines()), 1)
        raise UsageError(f"{path}:{line}: not valid TOML: {error}") from None
    lines = text.splitlines()
    where = _Locator(path, lines)
    unknown = set(document) - {"defaults", "lower"}
    if unknown:
        name = sorted(unknown)[0]
        raise where.error(where.top_level(name), f"unknown table or key '{name}'; use [defaults] and [[lower]]")
    defaults = document.get("defaults", {})
    if not isinstance(defaults, dict):
        raise where.error(where.top_level("defaults"), "'defaults' must be a table: [defaults]")
    _check_keys(defaults, where, lambda key: where.in_defaults(key), allowed=set(keys()) - {"model", "targets"})
    entries = document.get("lower", [])
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"{path}: no lowerings; add a [[lower]] table with model = ... and targets = [...]")
    jobs: list[Job] = []
    seen: dict[str, int] = {}
    for number, entry in enumerate(entries):
        locate = lambda key, n=number: where.in_entry(n, key)  # noqa: E731
        _check_keys(entry, where, locate, allowed=set(keys()))
        merged = {**defaults, **entry}
        for required in ("model", "targets"):
            if required not in merged:
                raise where.error(where.entry_line(number), f"[[lower]] has no '{required}'; add {required} = ...")
        if not merged["targets"] or not all(isinstance(t, str) for t in merged["targets"]):
            raise where.error(locate("targets"), "'targets' must be a non-empty list of target names")
        model = merged["model"]
        if model.startswith("zoo:"):
            from lowerkit.zoo import catalogue

            names = [e.name for e in catalogue.ENTRIES]
            if model.removeprefix("zoo:") not in names:
                raise where.error(locate("model"), f"unknown zoo model '{model}'; one of: {', '.join(names)}")
        given = _backend_options(merged, path, where, locate)
        source = _source_options(merged, entry, path, where, locate)
        calibration = merged.get("calibration")
        calibration_path = (path.parent / calibration) if calibration is not None else None
        if calibration_path is not None and not calibration_path.exists():
            line = locate("calibration") if "calibration" in entry else where.in_defaults("calibration")
            raise where.error(line, f"calibration path '{calibration_path}' does not exist")
        for target_name in merged["targets"]:
            try:
                target = targets.get(target_name)
            except UsageError as error:
                raise where.error(locate("targets"), str(error)) from None
            for key, option in fleet_keys().items():
                if is_given(merged.get(key)) and not option.takes(target) and option.ignored(target) is None:
                    raise where.error(locate(key), option.refusal(target, name=key))
            job = Job(
                index=len(jobs),
                model=model,
                target=target.name,
                calibration=calibration_path,
                verify=bool(merged.get("verify", False)),
                source=source,
                given=given,
            )
            if job.output_name in seen:
                raise where.error(
                    locate("targets"),
                    f"{job.output_name} is already built by the [[lower]] at line {seen[job.output_name]}; list each model x target once",
                )
            seen[job.output_name] = where.entry_line(number)
            jobs.append(job)
    return jobs


def _backend_options(merged: dict[str, Any], path: Path, where: _Locator, locate: Any) -> tuple[tuple[str, Any], ...]:
    """The backend options of a [[lower]], by flag: lists as tuples, paths relative to FLEET.toml."""
    given: list[tuple[str, Any]] = []
    for key, option in fleet_keys().items():
        value = merged.get(key)
        if value is None:
            continue
        if option.fleet_list is not None:
            if not all(isinstance(item, str) for item in value):
                raise where.error(locate(key), f"'{key}' must be a list of {option.fleet_list}")
            value = tuple(value)
        elif option.kind == "path":
            value = path.parent / value
        given.append((option.flag, value))
    return tuple(given)


def _source_options(merged: dict[str, Any], entry: dict[str, Any], path: Path, where: _Locator, locate: Any) -> SourceOptions:
    """The [[lower]]'s source options (`weights` relative to FLEET.toml), checked as `lower` checks them."""

    def line(key: str) -> int:
        return int(locate(key)) if key in entry else where.in_defaults(key)

    weights = merged.get("weights")
    weights_path = (path.parent / weights) if weights is not None else None
    if weights_path is not None and not weights_path.is_file():
        raise where.error(line("weights"), f"weights file '{weights_path}' does not exist")
    task = merged.get("task")
    if task is not None and task not in TASKS:
        raise where.error(line("task"), f"unknown task '{task}'; one of: {', '.join(TASKS)}")
    for key in ("sequence_length", "image_size"):
        if key in merged and merged[key] < 1:
            raise where.error(line(key), f"'{key}' must be at least 1")
    return SourceOptions(
        weights=weights_path, task=task, random_weights=bool(merged.get("random_weights", False)),
        sequence_length=merged.get("sequence_length"), image_size=merged.get("image_size"),
    )


def shard(jobs: list[Job], spec: str | None) -> list[Job]:
    """The jobs of shard 'I/N' (1-based; job k goes to shard k mod N + 1), or all of them."""
    if spec is None:
        return jobs
    match = re.fullmatch(r"(\d+)/(\d+)", spec)
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise UsageError(f"--shard '{spec}' must be I/N with 1 <= I <= N, e.g. --shard 2/4")
    index, count = int(match[1]), int(match[2])
    return [job for job in jobs if job.index % count == index - 1]


def _check_keys(table: Any, where: _Locator, locate: Any, *, allowed: set[str]) -> None:
    if not isinstance(table, dict):
        raise UsageError(f"{where.path}: 'lower' must be an array of tables: [[lower]]")
    types = keys()
    for key, value in table.items():
        if key not in allowed:
            raise where.error(locate(key), f"unknown key '{key}'; allowed here: {', '.join(sorted(allowed))}")
        if not isinstance(value, types[key]) or (types[key] is int and isinstance(value, bool)):
            raise where.error(locate(key), f"'{key}' must be a {types[key].__name__}, got {type(value).__name__}")


@dataclass
class _Locator:
    """Line numbers of tables and keys in the file's text (tomllib does not keep them)."""

    path: Path
    lines: list[str]

    def error(self, line: int, message: str) -> UsageError:
        return UsageError(f"{self.path}:{line}: {message}")

    def entry_line(self, number: int) -> int:
        headers = [i for i, line in enumerate(self.lines) if _HEADER.match(line)]
        return headers[number] + 1 if number < len(headers) else 1

    def in_entry(self, number: int, key: str) -> int:
        headers = [i for i, line in enumerate(self.lines) if _HEADER.match(line)] + [len(self.lines)]
        if number + 1 >= len(headers):
            return 1
        return self._find(key, headers[number], headers[number + 1]) or headers[number] + 1

    def in_defaults(self, key: str) -> int:
        start = next((i for i, line in enumerate(self.lines) if re.match(r"^\s*\[\s*defaults\s*\]", line)), 0)
        end = next((i for i in range(start + 1, len(self.lines)) if self.lines[i].lstrip().startswith("[")), len(self.lines))
        return self._find(key, start, end) or start + 1

    def top_level(self, key: str) -> int:
        for i, line in enumerate(self.lines):
            if re.match(rf"^\s*(\[+\s*)?{re.escape(key)}\b", line):
                return i + 1
        return 1

    def _find(self, key: str, start: int, end: int) -> int | None:
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
        return next((i + 1 for i in range(start, end) if pattern.match(self.lines[i])), None)
