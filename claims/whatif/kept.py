"""What a process keeps for reuse: simulations with assumptions, bounded in number and in
devices, and the latest answers as JSON bytes (`KeptAnswers`), bounded in number and bytes.

A repeated what-if with the same assumptions reuses the simulation built for it (its pools for
every node), so a few are kept, most recent first. Beyond what the cluster itself costs, each
holds the slices its assumptions made (added nodes, copied or retainted slices), parsed in the
process-wide slice cache. `KeptSimulations` bounds both: at most `limit` simulations, whose
assumed slices together carry at most `max_devices` devices; a simulation over that alone is not
kept, and the parsed slices of every simulation dropped or never kept are let go.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from claims.whatif.inputs import JSON
from claims.whatif.simulation import Simulation
from claims.whatif.state import ClusterView

__all__ = ["KeptAnswers", "KeptSimulations", "assumed_slices"]


def assumed_slices(view: ClusterView, cluster_slices: Sequence[JSON]) -> list[JSON]:
    """The view's slices that are not the cluster's own objects (added, copied, retainted)."""
    shared = {id(s) for s in cluster_slices}
    return [s for s in view.slices if id(s) not in shared]


def _devices(slices: Sequence[JSON]) -> int:
    return sum(len((s.get("spec") or {}).get("devices") or []) for s in slices)


class KeptSimulations:
    """Simulations by question key, most recent first, within `limit` and `max_devices`."""

    def __init__(self, *, limit: int, max_devices: int) -> None:
        self.limit = limit
        self.max_devices = max_devices
        self._lock = threading.Lock()
        self._sims: OrderedDict[str, Simulation] = OrderedDict()
        # Per key, the devices of its assumed slices and the slices.
        self._assumed: dict[str, tuple[int, list[JSON]]] = {}

    def get(self, key: str) -> Simulation | None:
        with self._lock:
            return self._sims.get(key)

    def keep(self, key: str, sim: Simulation, *, assumed: list[JSON]) -> None:
        """Keep `sim` first, dropping the oldest past the bounds (`sim` too if it alone is)."""
        devices = _devices(assumed)
        dropped: list[list[JSON]] = []
        with self._lock:
            self._sims.pop(key, None)
            old = self._assumed.pop(key, None)
            if old is not None:
                dropped.append(old[1])
            if devices <= self.max_devices:
                self._sims[key] = sim
                self._sims.move_to_end(key, last=False)
                self._assumed[key] = (devices, assumed)
            while len(self._sims) > self.limit or self._devices_kept() > self.max_devices:
                gone, _ = self._sims.popitem()
                dropped.append(self._assumed.pop(gone)[1])
        for slices in dropped:
            sim.view.slice_cache.forget(slices)

    def drop(self, key: str, sim: Simulation) -> None:
        """Stop keeping `sim` (if it is the one kept under `key`) and let its slices go."""
        entry = None
        with self._lock:
            if self._sims.get(key) is sim:
                del self._sims[key]
                entry = self._assumed.pop(key, None)
        if entry is not None:
            sim.view.slice_cache.forget(entry[1])

    def release(self, key: str, sim: Simulation, *, assumed: list[JSON]) -> None:
        """After use of a simulation built for `key`: its slices go unless it is still kept."""
        with self._lock:
            kept = self._sims.get(key) is sim
        if not kept:
            sim.view.slice_cache.forget(assumed)

    def clear(self) -> None:
        with self._lock:
            self._sims.clear()
            self._assumed.clear()

    def summary(self) -> tuple[int, int]:
        """How many simulations are kept, and the devices their assumptions added."""
        with self._lock:
            return len(self._sims), self._devices_kept()

    def _devices_kept(self) -> int:
        return sum(devices for devices, _ in self._assumed.values())


class KeptAnswers:
    """The latest answers as their JSON bytes, by cache key, most recently asked last.

    A repeated question is decoded once from them, not unpickled and decoded twice from the
    Django cache (200-400 ms at 5,000 nodes); the cache stays the store every process shares.
    Bytes, not decoded answers: they hold no object the cyclic collector walks on every full
    collection, and nobody reading an answer can change the kept one.
    """

    def __init__(self, *, limit: int, max_bytes: int) -> None:
        self.limit = limit
        self.max_bytes = max_bytes
        self._answers: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            found = self._answers.get(key)
            if found is not None:
                self._answers.move_to_end(key)
            return found

    def keep(self, key: str, data: bytes) -> None:
        """Keep `data` (one answer over `max_bytes` is not kept); the least recently asked go
        past the bounds."""
        if len(data) > self.max_bytes:
            return
        with self._lock:
            self._answers[key] = data
            self._answers.move_to_end(key)
            while len(self._answers) > self.limit or self.size() > self.max_bytes:
                self._answers.popitem(last=False)

    def size(self) -> int:
        return sum(map(len, self._answers.values()))

    def __len__(self) -> int:
        return len(self._answers)

    def clear(self) -> None:
        with self._lock:
            self._answers.clear()
