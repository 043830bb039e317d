"""faketensor_cache: FakeTensor's dispatch cache extended to ExecuTorch op namespaces."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from lowerkit.pass_infra.accelerations.replay_engine import FAKE_CACHE
from lowerkit.pass_infra.accelerations.versions import PROVEN_ON, proven_scope
from lowerkit.pass_infra.errors import PassInfraError

__all__ = ["EXECUTORCH_NAMESPACES", "faketensor_cache"]

#: The op namespaces ExecuTorch lowering dispatches through FakeTensor, which stock
#: FakeTensor never caches (it caches aten/prim/prims only).
EXECUTORCH_NAMESPACES: frozenset[str] = frozenset(
    {
        "quantized_decomposed",
        "tosa",
        "dim_order_ops",
        "cortex_m",
        "executorch_prim",
        "llama",
        "torchao",
    }
)


@contextmanager
def faketensor_cache(namespaces: Iterable[str] = EXECUTORCH_NAMESPACES) -> Iterator[None]:
    """Let FakeTensor's dispatch cache cover `namespaces`; restore its global state on exit.

    Only for the thread inside the block (which holds the process-wide lowering lock);
    scopes nest, the last one out restores. Stock behaviour (with an
    ``UnprovenVersionWarning``) on versions other than ``PROVEN_ON``.
    """
    if isinstance(namespaces, str):
        raise PassInfraError(
            f"namespaces must be a collection of names, got the string {namespaces!r}; "
            f"write namespaces=[{namespaces!r}]"
        )
    wanted = frozenset(namespaces)
    builtin = wanted & {"aten", "prim", "prims"}
    if builtin:
        raise PassInfraError(
            f"namespaces {sorted(builtin)} are cached by FakeTensor already; leave them out"
        )
    with proven_scope("lowerkit-pass-infra", PROVEN_ON, "faketensor_cache", FAKE_CACHE.scope(wanted)):
        yield
