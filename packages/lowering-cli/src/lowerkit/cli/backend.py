"""The backend seam: what one backend family (Arm, Core ML) answers for its targets.

A `Backend` declares, as data, its targets and the `lower` / `debug` options only some
targets take (`TargetOption`: flag, help, which targets take it, the field of its settings it
fills, whether FLEET.toml takes it); the commands' flags and the fleet file's keys are made
from those declarations. For a target of its own it checks the options given (`settings`),
lowers, verifies, debugs, says what it made (`report` fields, `result_lines`,
`short_verification`), adds to the cache key (`cache_key_extras`) and reads its delegates'
payloads and report fields back (`decoders`, `report_lines`, `report_figures`). `targets`
registers the backends; every other module asks it and never names a family. Importing a
backend imports no torch: its library loads when it lowers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from lowerkit.cli.options import LowerOptions, Target
from lowerkit.cli.progress import Steps
from lowerkit.cli.result import Lowered

if TYPE_CHECKING:
    from lowerkit.cli.sources.model import Inputs, ModelSource

#: The options of a command line that only some targets take, by flag ("--tosa-dir"), as
#: parsed; None or False: not given.
Given = Mapping[str, Any]


def is_given(value: Any) -> bool:
    """Whether an option's parsed value means the user gave it."""
    return value is not None and value is not False


def _not_ignored(target: Target) -> str | None:
    return None


def _no_hint(target: Target) -> str:
    return ""


def _unchecked(target: Target, value: Any) -> Any:
    return value


def _as_parsed(value: Any) -> Any:
    return value


def _no_figures(decoded: dict[str, Any]) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class TargetOption:
    """A command-line option only some targets take: how it parses, where its value goes, and
    what the targets that do not take it say to it."""

    flag: str
    #: Who takes it, as the refusal names them ("Core ML targets").
    applies_to: str
    takes: Callable[[Target], bool]
    #: Its `--help` text.
    help: str = ""
    #: How the command line gives it: text, a path, or an on/off flag.
    kind: Literal["text", "path", "flag"] = "text"
    #: The command that takes it.
    command: Literal["lower", "debug"] = "lower"
    #: The field of the backend's `settings_type` it fills (None: an output `write_outputs` writes).
    field: str | None = None
    #: The value the field holds, checked for the target: a UsageError (one line) otherwise.
    convert: Callable[[Target, Any], Any] = _unchecked
    #: The command line's text as `convert` takes it (e.g. "a,b" -> ["a", "b"]); FLEET.toml
    #: gives that form itself.
    parse: Callable[[Any], Any] = _as_parsed
    #: A file `lower` writes: checked writable before any work.
    writes: bool = False
    #: Whether FLEET.toml takes it, as `fleet_key` (a path there is relative to the file).
    fleet: bool = False
    #: In FLEET.toml a list of these ("MIL pass names"); None: one value, as on the command line.
    fleet_list: str | None = None
    #: For a target that does not take it: a warning if the target ignores it (as upstream
    #: does), None if it refuses it.
    ignored: Callable[[Target], str | None] = _not_ignored
    #: Text appended to the refusal (where to go instead).
    hint: Callable[[Target], str] = _no_hint
    #: The refusal's wording.
    refusal_text: str = "{flag} applies to {applies_to}, not '{target}'"

    @property
    def fleet_key(self) -> str:
        """Its FLEET.toml key: the flag in snake case ("--coreml-passes" -> "coreml_passes")."""
        return self.flag.removeprefix("--").replace("-", "_")

    def refusal(self, target: Target, name: str | None = None) -> str:
        """The one-line error for a `target` that does not take it; `name` in place of the flag (a FLEET.toml key)."""
        text = self.refusal_text.format(flag=name or self.flag, applies_to=self.applies_to, target=target.name)
        return text + self.hint(target)


@dataclass(frozen=True)
class PayloadDecoder:
    """How `inspect` and `compare` read the payload of one kind of delegate in a .pte (standard library)."""

    #: The delegate's backend id in the .pte ("EthosUBackend").
    backend_id: str
    #: Its key in each delegate of `inspect --json` (null for the other delegates).
    key: str
    #: (payload, compile specs, whether `inspect --weights` asks for the costly decoding) ->
    #: JSON-ready figures, or None.
    decode: Callable[[bytes, Mapping[str, str], bool], dict[str, Any] | None]
    #: `inspect`'s lines for such a delegate: (compile specs, decoded figures or None) -> lines.
    lines: Callable[[Mapping[str, str], dict[str, Any] | None], list[str]]
    #: `compare`'s rows for decoded figures.
    figures: Callable[[dict[str, Any]], dict[str, Any]] = _no_figures


@dataclass(frozen=True)
class DebugRequest:
    """What `lowerkit debug` asks of a backend besides the model and the target."""

    calibration: list[Inputs]
    keep_float: tuple[str, ...]
    #: Where the error starts, in the backend's unit (None: its default).
    threshold: float | None
    scan: int
    target_sqnr: float
    search: int
    #: The backend's own `debug` options the target takes, by flag (see `TargetOption.command`).
    given: Given


class Backend(ABC):
    """One backend family: its targets, the options they take, and how they lower, verify and debug."""

    #: `Target.backend` of its targets.
    family: str
    #: Its name in messages ("Core ML").
    title: str
    #: The modules its lowering imports (a daemon imports them ahead).
    preload: tuple[str, ...]
    #: The distributions whose versions decide its programs' bytes (`cache.key.toolchain_fingerprint`).
    toolchain: tuple[str, ...] = ()
    #: lowerkit's packages it lowers with, as (distribution, package under `lowerkit/`): their
    #: versions and source are in the cache key.
    lowerkit_packages: tuple[tuple[str, str], ...] = ()
    #: The top-level third-party packages its lowering imports (a daemon that imported other
    #: versions is not used: `daemon.fingerprint`).
    libraries: tuple[str, ...] = ()
    #: (verification key, label) pairs `short_verification` reads, most telling first.
    verification_figures: tuple[tuple[str, str], ...]
    #: What `--verify` cannot check for it, said once after the demo ("" for nothing).
    verify_caveat: str = ""
    targets: tuple[Target, ...]
    options: tuple[TargetOption, ...]
    #: The frozen dataclass of its settings (`LowerOptions.settings`), every field defaulted.
    settings_type: type
    #: How `inspect` and `compare` read its delegates.
    decoders: tuple[PayloadDecoder, ...] = ()
    #: (zoo model, target) pairs `lowerkit demo` lowers.
    demo: tuple[tuple[str, str], ...] = ()

    def settings(self, target: Target, given: Given) -> Any:
        """Its `settings_type` for the options `given` (each `TargetOption.convert`ed for `target`):
        None when every field keeps its default, so that an unset lowering has one cache key.

        `given` holds only options `target` takes (`targets.check_options` refused the rest).
        """
        values = {
            option.field: option.convert(target, given[option.flag])
            for option in self.options
            if option.field is not None and option.flag in given
        }
        settings = self.settings_type(**values)
        return None if settings == self.settings_type() else settings

    def settings_of(self, options: LowerOptions) -> Any:
        """`options.settings`, or its defaults when None."""
        return options.settings if options.settings is not None else self.settings_type()

    def llm_export_scope(self, config: Any) -> AbstractContextManager[None] | None:
        """The scope ExecuTorch's LLM export (``lowerkit llm``) runs in when `config` (its
        ``LlmConfig``) enables this backend; None when it does not."""
        return None

    def llm_overrides(self, target: Target) -> dict[str, Any] | None:
        """The ``LlmConfig`` overrides with which ExecuTorch's LLM export builds `target` (``lower
        --task text-generation``); None when it cannot."""
        return None

    def llm_prefill_decode_flags(self, target: Target) -> list[str] | None:
        """The flags with which the backend's prefill + decode LLM exporter builds `target` (``lower
        --task text-generation --prefill N``); None when ExecuTorch has no such exporter for it."""
        return None

    def export_llm_prefill_decode(self, argv: Sequence[str]) -> None:
        """Run the backend's prefill + decode LLM exporter with its command-line arguments `argv`."""
        raise NotImplementedError(f"{self.title} has no prefill + decode LLM exporter")

    @abstractmethod
    def lower(self, source: ModelSource, options: LowerOptions, *, calibration: list[Inputs], steps: Steps) -> Lowered:
        """Lower `source` to `options.target` (calibrated on `calibration` when it quantizes)."""

    @abstractmethod
    def verify(self, lowered: Lowered, source: ModelSource) -> dict[str, Any]:
        """Check `lowered` against the float model: named figures (see `short_verification`)."""

    @abstractmethod
    def debuggable(self, target: Target) -> bool:
        """Whether `lowerkit debug` compares `target`'s lowered layers with float."""

    @abstractmethod
    def debug(self, source: ModelSource, target: Target, request: DebugRequest) -> Any:
        """The layer-by-layer report of a debuggable `target` (a UsageError if nothing is quantized)."""

    def pattern(self, target: Target) -> str | None:
        """The name pattern of `target`'s group (e.g. "ethos-u*"), for messages that list targets."""
        return None

    def cache_key_extras(self, target: Target) -> dict[str, str]:
        """What the cache key needs for `target` beyond the options and the toolchain, by tag
        (e.g. a binary of the user's own the lowering runs)."""
        return {}

    def write_outputs(self, lowered: Lowered, options: LowerOptions, given: Given) -> list[str]:
        """Write the extra outputs `options` and `given` ask for; a line for each, for the terminal."""
        return []

    def result_lines(self, lowered: Lowered) -> list[str]:
        """Lines after `lower`'s "wrote" line about what the lowering made (an NPU report)."""
        return []

    def report_lines(self, report: Mapping[str, Any]) -> list[str]:
        """`inspect`'s lines for its fields of a `lower --report` file (`Lowered.report`)."""
        return []

    def report_figures(self, report: Mapping[str, Any]) -> dict[str, Any]:
        """`compare`'s rows for its fields of a `lower --report` file."""
        return {}

    def short_verification(self, check: dict[str, Any]) -> str:
        """A verification result in a few words: its SQNR (and max error in quanta), or that there was none."""
        for key, label in self.verification_figures:
            if isinstance(check.get(key), float):
                quanta = check.get("max_error_quanta")
                return f"{label} {check[key]:.1f} dB" + (f", max error {quanta:g} quanta" if quanta is not None else "")
        return "no quantization to check"
