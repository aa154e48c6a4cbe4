"""The scope a request, task or thread works in: which cluster's rows it reads and writes.

The base keeps an opaque id (the primary key of a cluster); the app that owns clusters says what
it means. Rows of scoped models are read and written only inside a scope: a query made outside
one raises `ScopeUnset` rather than reading every cluster's rows (the django-scopes pattern: an
unscoped read is a bug to be found by a test, never a silent mix of clusters).

Context variables do not cross into new threads on their own: code starting a thread that
touches the database passes `scope.carried(target)` (the caller's scope) or enters `scope.use`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

_CURRENT: contextvars.ContextVar[int | Callable[[], int] | None] = contextvars.ContextVar(
    "scope", default=None
)

T = TypeVar("T")


class ScopeUnset(RuntimeError):
    """A scoped model was used outside any scope."""


def current() -> int:
    """The id of the scope in force; raises ScopeUnset outside one."""
    value = get()
    if value is None:
        raise ScopeUnset(
            "no cluster scope is set: enter dashboard.scope.use(cluster_id) before reading or "
            "writing cluster data"
        )
    return value


def get() -> int | None:
    """The id of the scope in force, or None."""
    value = _CURRENT.get()
    return value() if callable(value) else value


@contextmanager
def use(scope_id: int | Callable[[], int]) -> Iterator[None]:
    """Work in `scope_id` until the block ends (nested blocks restore the outer scope).

    A callable is asked for the id when a query first needs it (a request that reads no
    cluster data, a health probe, looks nothing up); it is asked at every use, so it keeps
    its own answer."""
    token = _CURRENT.set(_checked(scope_id))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def enter_for_good(scope_id: int | Callable[[], int]) -> None:
    """Work in `scope_id` from now on, in this thread and what it starts with `carried`: for a
    script whose whole run is one cluster's (a benchmark). Code that ends has `use`."""
    _CURRENT.set(_checked(scope_id))


def _checked(scope_id: int | Callable[[], int]) -> int | Callable[[], int]:
    if not callable(scope_id) and (not isinstance(scope_id, int) or isinstance(scope_id, bool)):
        raise TypeError(f"a scope is a cluster's integer id, not {scope_id!r}")
    return scope_id


def carried(target: Callable[..., T]) -> Callable[..., T]:
    """`target` run in the caller's scope (for a thread or pool started now)."""
    scope_id = get()
    if scope_id is None:
        return target

    def run(*args: Any, **kwargs: Any) -> T:
        with use(scope_id):
            return target(*args, **kwargs)

    return run
