"""The backend seam: what one backend family (Arm, Core ML) answers for its targets.

A `Backend` declares its targets and the `lower` / `debug` options only some targets take
(`TargetOption`), and, for a target of its own, checks the options given (`settings`),
lowers, verifies, debugs and says what it made (`short_verification`, `result_lines`).
`targets` registers the backends; every other module asks it for a target's backend and
never branches on a family's name. Importing a backend imports no torch: its library loads
when it lowers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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


@dataclass(frozen=True)
class TargetOption:
    """A command-line option only some targets take, and what the other targets say to it."""

    flag: str
    #: Who takes it, as the refusal names them ("Core ML targets").
    applies_to: str
    takes: Callable[[Target], bool]
    #: For a target that does not take it: a warning if the target ignores it (as upstream
    #: does), None if it refuses it.
    ignored: Callable[[Target], str | None] = _not_ignored
    #: Text appended to the refusal (where to go instead).
    hint: Callable[[Target], str] = _no_hint
    #: The refusal's wording.
    refusal_text: str = "{flag} applies to {applies_to}, not '{target}'"

    def refusal(self, target: Target, name: str | None = None) -> str:
        """The one-line error for a `target` that does not take it; `name` in place of the flag (a FLEET.toml key)."""
        text = self.refusal_text.format(flag=name or self.flag, applies_to=self.applies_to, target=target.name)
        return text + self.hint(target)


@dataclass(frozen=True)
class DebugRequest:
    """What `lowerkit debug` asks of a backend besides the model and the target."""

    calibration: list[Inputs]
    keep_float: tuple[str, ...]
    #: Where the error starts, in the backend's unit (None: its default).
    threshold: float | None
    scan: int
    bisect: bool
    target_sqnr: float
    search: int


class Backend(ABC):
    """One backend family: its targets, the options they take, and how they lower, verify and debug."""

    #: `Target.backend` of its targets.
    family: str
    #: Its name in messages ("Core ML").
    title: str
    #: The modules its lowering imports (a daemon imports them ahead).
    preload: tuple[str, ...]
    #: (verification key, label) pairs `short_verification` reads, most telling first.
    verification_figures: tuple[tuple[str, str], ...]
    targets: tuple[Target, ...]
    options: tuple[TargetOption, ...]

    @abstractmethod
    def settings(self, target: Target, given: Given) -> dict[str, Any]:
        """The `LowerOptions` fields of `given` for `target`, checked: a UsageError (one line) otherwise.

        `given` holds only options `target` takes (`targets.check_options` refused the rest).
        """

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

    def runs_model_converter(self, target: Target) -> bool:
        """Whether lowering `target` runs Arm's model converter (its binary is in the cache key)."""
        return False

    def write_outputs(self, lowered: Lowered, options: LowerOptions, given: Given) -> list[str]:
        """Write the extra outputs `options` and `given` ask for; a line for each, for the terminal."""
        return []

    def result_lines(self, lowered: Lowered) -> list[str]:
        """Lines after `lower`'s "wrote" line about what the lowering made (an NPU report)."""
        return []

    def short_verification(self, check: dict[str, Any]) -> str:
        """A verification result in a few words: its SQNR (and max error in quanta), or that there was none."""
        for key, label in self.verification_figures:
            if isinstance(check.get(key), float):
                quanta = check.get("max_error_quanta")
                return f"{label} {check[key]:.1f} dB" + (f", max error {quanta:g} quanta" if quanta is not None else "")
        return "no quantization to check"
