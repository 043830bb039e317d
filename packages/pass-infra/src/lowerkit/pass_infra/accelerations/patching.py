"""One patch mechanism for every lowerkit package, and the process-wide lowering lock.

A `Patch` is a named set of `Replacement`s of third-party attributes (torch, ExecuTorch,
coremltools). It is held through `Patch.scope()`:

* **reference-counted and reentrant**: the first scope to open (in any thread) installs the
  replacements, the last one to close restores exactly what was there (or deletes what was
  absent); scopes nest freely, in one thread or several;
* **thread-safe**: installing, counting and restoring happen under the patch's own lock;
* **exception-safe**: a scope is entered inside its ``try``; an install that fails half way
  puts back what it had replaced before re-raising; restore hooks run before the restore,
  and the restore happens even when a hook raises;
* **thread-local dispatch**: a replaced function or staticmethod is installed as a
  dispatcher that calls lowerkit's version only for a thread inside a scope of this patch,
  and the original for every other thread, so code outside lowerkit behaves as stock while a
  scope is open elsewhere. A replacement with ``dispatch=False`` (a descriptor, a class,
  any value that is not a function) must be neutral for other threads by itself; its
  docstring says why it is;
* **never applied by an import**: nothing is installed until a scope opens.

`suspend_all()` turns every patch off for the calling thread for a block (its open scopes are
set aside and put back after): verify mode runs its stock reference that way.

``scope(options)`` pushes `options` on a per-thread stack (`Patch.options`, `Patch.stack`),
so one installed patch serves nested scopes that ask for different behaviour.

torch and ExecuTorch are not thread-safe for lowering (two stock
``to_edge_transform_and_lower`` calls in threads fail), so lowerkit's entry points and
scopes also hold `lowering_lock()`, one reentrant lock for the whole process, for their whole
duration: lowerings in several threads run one after the other, with sequential results.
A thread that opens a lowerkit scope and waits inside it for another thread that calls a
lowerkit entry point deadlocks; do not do that.

This lives in lowerkit-pass-infra (pure Python, no torch import) and coreml-preprocess
depends on pass-infra for it: one mechanism and, above all, one lowering lock shared by the
Arm and Core ML paths (a Core ML and an Arm lowering in two threads must serialize too).
"""

from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["Patch", "Replacement", "all_patches", "lowering_lock", "suspend_all"]

_LOWERING_LOCK = threading.RLock()

#: Every Patch made in this process (for `suspend_all`).
_PATCHES: weakref.WeakSet[Patch] = weakref.WeakSet()
_PATCHES_LOCK = threading.Lock()


def lowering_lock() -> Any:
    """The process-wide reentrant lock lowerkit entry points hold (``with lowering_lock(): ...``)."""
    return _LOWERING_LOCK


@dataclass(frozen=True)
class Replacement:
    """Replace ``owner.name`` (a class or module attribute) with `value` while a scope is open."""

    owner: Any
    name: str
    value: Any
    #: Install a per-call dispatcher (threads outside a scope get the original). Needs a
    #: function or staticmethod, both for `value` and for what it replaces.
    dispatch: bool = True
    #: With dispatch: use `value` only when ``enabled(patch.options())`` is also true.
    enabled: Callable[[Any], bool] | None = None


@dataclass
class _Saved:
    owner: Any
    name: str
    present: bool
    old: Any


def _function_of(value: Any) -> tuple[Callable[..., Any], bool]:
    """(the callable, whether it is wrapped in staticmethod) for a dispatchable value."""
    if isinstance(value, staticmethod):
        return value.__func__, True
    if inspect.isfunction(value) or inspect.isbuiltin(value):
        return value, False
    raise TypeError(
        f"cannot dispatch {value!r} per thread (not a function or staticmethod); "
        "use Replacement(..., dispatch=False) for a value that is neutral for other threads"
    )


class Patch:
    """A named, reference-counted, thread-safe set of replacements held through `scope()`."""

    def __init__(
        self,
        name: str,
        replacements: Callable[[], Sequence[Replacement]] | Sequence[Replacement],
        *,
        on_install: Sequence[Callable[[], None]] = (),
        on_uninstall: Sequence[Callable[[], None]] = (),
    ) -> None:
        self.name = name
        self._replacements = replacements
        self._on_install = tuple(on_install)
        self._on_uninstall = tuple(on_uninstall)
        self._lock = threading.RLock()
        self._count = 0
        self._saved: list[_Saved] = []
        self._local = threading.local()
        caller = inspect.currentframe()
        #: The module that made the patch (its `name` should be that module's).
        self.module: str = caller.f_back.f_globals.get("__name__", "") if caller and caller.f_back else ""
        with _PATCHES_LOCK:
            _PATCHES.add(self)

    def __repr__(self) -> str:
        return f"Patch({self.name!r}, open scopes={self._count})"

    @property
    def installed(self) -> bool:
        """True while at least one scope (in any thread) is open."""
        return self._count > 0

    def replacements(self) -> tuple[Replacement, ...]:
        """What a scope installs (built now, not installed): for the table of accelerations."""
        replacements = self._replacements
        return tuple(replacements() if callable(replacements) else replacements)

    @property
    def hooks(self) -> tuple[Callable[[], None], ...]:
        """The install hooks (what the patch does besides its replacements)."""
        return self._on_install

    def active(self) -> bool:
        """True when the calling thread is inside a scope of this patch."""
        return bool(getattr(self._local, "stack", None))

    def stack(self) -> tuple[Any, ...]:
        """The options of the calling thread's open scopes, outermost first."""
        return tuple(getattr(self._local, "stack", ()))

    def options(self) -> Any:
        """The options of the calling thread's innermost open scope (None outside any)."""
        stack = getattr(self._local, "stack", None)
        return stack[-1] if stack else None

    def swap_stack(self, stack: list[Any]) -> list[Any]:
        """Give the calling thread the scope stack `stack` and return the one it had (`suspend_all`)."""
        previous = getattr(self._local, "stack", None)
        self._local.stack = stack
        return [] if previous is None else previous

    @contextmanager
    def scope(self, options: Any = None) -> Iterator[None]:
        """Hold the patch for the block (installing it if this is the first open scope)."""
        entered = False
        try:
            self._enter(options)
            entered = True
            yield
        finally:
            if entered:
                self._exit()

    # ------------------------------------------------------------------ internals

    def _enter(self, options: Any) -> None:
        with self._lock:
            if self._count == 0:
                self._install()
            self._count += 1
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        stack.append(options)

    def _exit(self) -> None:
        self._local.stack.pop()
        with self._lock:
            self._count -= 1
            if self._count == 0:
                self._uninstall()

    def _install(self) -> None:
        replacements = self.replacements()
        try:
            for r in replacements:
                self._replace(r)
            for hook in self._on_install:
                hook()
        except BaseException:
            self._restore()
            raise

    def _replace(self, r: Replacement) -> None:
        owner, name = r.owner, r.name
        if isinstance(owner, type):
            present = name in vars(owner)
            old = vars(owner)[name] if present else None
        else:
            present = hasattr(owner, name)
            old = getattr(owner, name, None)
        value = r.value
        if r.dispatch:
            current = old if present else inspect.getattr_static(owner, name)
            value = self._dispatcher(current, r.value, r.enabled)
        self._saved.append(_Saved(owner, name, present, old))
        setattr(owner, name, value)

    def _dispatcher(
        self, original: Any, replacement: Any, enabled: Callable[[Any], bool] | None
    ) -> Any:
        stock, static = _function_of(original)
        ours, _ = _function_of(replacement)
        local = self._local

        def dispatch(*args: Any, **kwargs: Any) -> Any:
            stack = getattr(local, "stack", None)
            if stack and (enabled is None or enabled(stack[-1])):
                return ours(*args, **kwargs)
            return stock(*args, **kwargs)

        dispatch.__name__ = getattr(stock, "__name__", "dispatch")
        dispatch.__qualname__ = getattr(stock, "__qualname__", dispatch.__name__)
        dispatch.__doc__ = getattr(stock, "__doc__", None)
        dispatch.__wrapped__ = stock  # type: ignore[attr-defined]
        dispatch.__dict__["lowerkit_patch"] = self.name
        return staticmethod(dispatch) if static else dispatch

    def _uninstall(self) -> None:
        try:
            for hook in self._on_uninstall:
                hook()
        finally:
            self._restore()

    def _restore(self) -> None:
        saved, self._saved = self._saved, []
        for s in reversed(saved):
            if s.present:
                setattr(s.owner, s.name, s.old)
            else:
                delattr(s.owner, s.name)


def all_patches() -> list[Patch]:
    """Every Patch made in this process so far."""
    with _PATCHES_LOCK:
        return list(_PATCHES)


@contextmanager
def suspend_all() -> Iterator[None]:
    """Within the block the calling thread runs stock: every patch acts as if none of this
    thread's scopes were open (dispatchers call the original, `Patch.active()` is False).

    The thread's open scopes are set aside and put back on exit; scopes opened inside the
    block work as usual. Other threads are unaffected. What a patch does process-wide rather
    than per thread (a ``dispatch=False`` value, an install hook such as ``gc.freeze()``) stays:
    each is neutral for threads outside a scope by construction (its docstring says why).
    """
    patches = all_patches()
    set_aside: list[tuple[Patch, list[Any]]] = []
    try:
        for patch in patches:
            if patch.active():
                set_aside.append((patch, patch.swap_stack([])))
        yield
    finally:
        for patch, stack in set_aside:
            patch.swap_stack(stack)
