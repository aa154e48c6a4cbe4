"""The clusters the dashboard keeps, and entering one's scope (`dashboard.scope`).

Requests, tasks, commands and threads work in one cluster's scope; until clusters can be added
(issue #27) every one of them works in the `default` cluster, which the migration that made
clusters created and which is created again when missing (a new or emptied database).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from dashboard import scope
from inventory.choices import DEFAULT_CLUSTER
from inventory.models import Cluster

T = TypeVar("T")

_lock = threading.Lock()
# Cluster name -> id, as last read; `forget` after clusters are removed.
_ids: dict[str, int] = {}


def cluster_id(name: str = DEFAULT_CLUSTER) -> int:
    """The id of the cluster called `name` (the default one is created when missing)."""
    known = _ids.get(name)
    if known is not None:
        return known
    with _lock:
        if name == DEFAULT_CLUSTER:
            pk = Cluster.objects.get_or_create(name=name)[0].pk
        else:
            pk = Cluster.objects.values_list("pk", flat=True).get(name=name)
        _ids[name] = pk
        return pk


def forget() -> None:
    """Read the clusters' ids again at next use (after a cluster was removed or re-created)."""
    with _lock:
        _ids.clear()


@contextmanager
def in_cluster(name: str = DEFAULT_CLUSTER) -> Iterator[None]:
    """Work in the scope of the cluster called `name` until the block ends; its id is looked
    up when first needed (a health probe reads no cluster data and touches no database)."""
    with scope.use(functools.partial(cluster_id, name)):
        yield


def in_default_cluster(target: Callable[..., T]) -> Callable[..., T]:
    """`target` run in the default cluster's scope unless a scope is in force already: the
    entry points of threads, tasks and commands, which all work on the one cluster for now."""

    @functools.wraps(target)
    def run(*args: Any, **kwargs: Any) -> T:
        if scope.get() is not None:
            return target(*args, **kwargs)
        with in_cluster():
            return target(*args, **kwargs)

    return run
