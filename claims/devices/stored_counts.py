"""Every pool's device counts kept in the database across restarts, under the table versions
they were computed at.

Counting every pool (and the devices held, tainted, blocked, reported unhealthy) is part of a
web process's start-up work (`counts.warm_counts`); a new process whose tables are at the
versions an earlier one counted them at (no transaction committed a write since:
`inventory.versions`), with the same classes and code, takes that process's counts. What is
stored is what `counts` keeps to follow later changes: the counts, the claim side (counts but
`unhealthy`, flagged devices, the pools each claim holds) and the pods' Unhealthy reports.
"""

from __future__ import annotations

import hashlib
import json
import logging
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from claims.devices.stored import read_kept, sources_digest, store_kept
from inventory.versions import is_private

__all__ = ["COUNTS_VERSION", "Stored", "counts_digest", "read_stored_counts", "store_counts"]

log = logging.getLogger(__name__)

# Raised when what is stored changes meaning.
COUNTS_VERSION = 1
_NAME = "pool-counts"
_HERE = Path(__file__).parent
_SOURCES = tuple(
    _HERE / name
    for name in (
        "counts.py",
        "stored_counts.py",
        "classes.py",
        "states.py",
        "health.py",
        "availability.py",
        "units.py",
    )
)

PoolKey = tuple[str, str]
DeviceKey = tuple[str, str, str]
Counts = Mapping[PoolKey, Mapping[str, int]]


class Stored:
    """The parts of the kept counts, as stored (see `counts._KeptCounts`)."""

    __slots__ = ("counts", "flagged", "pools_of", "reports", "side_counts", "unavailable")

    def __init__(
        self,
        *,
        counts: dict[PoolKey, dict[str, int]],
        unavailable: dict[PoolKey, int],
        side_counts: dict[PoolKey, dict[str, int]],
        flagged: frozenset[DeviceKey],
        pools_of: dict[int, frozenset[PoolKey]],
        reports: dict[int, frozenset[DeviceKey]],
    ) -> None:
        self.counts = counts
        self.unavailable = unavailable
        self.side_counts = side_counts
        self.flagged = flagged
        self.pools_of = pools_of
        self.reports = reports


def counts_digest(fingerprint: Any, classes_digest: str) -> str | None:
    """The digest counts computed at `fingerprint` (with the classes and CEL code of
    `classes_digest`) are stored under; None for a transaction's own uncommitted state."""
    if is_private(fingerprint) or not classes_digest:
        return None
    text = json.dumps([COUNTS_VERSION, fingerprint, classes_digest], default=str)
    digest = hashlib.sha256(text.encode())
    digest.update(sources_digest(*_SOURCES).encode())
    return digest.hexdigest()


def _counts(counts: Counts) -> list[Any]:
    return [[driver, pool, dict(entry)] for (driver, pool), entry in counts.items()]


def store_counts(digest: str, stored: Stored) -> None:
    """Keep the counts for the next process."""
    data = {
        "counts": _counts(stored.counts),
        "unavailable": [[d, p, n] for (d, p), n in stored.unavailable.items()],
        "side_counts": _counts(stored.side_counts),
        "flagged": [list(key) for key in stored.flagged],
        "pools_of": [[pk, [list(key) for key in keys]] for pk, keys in stored.pools_of.items()],
        "reports": [[pk, [list(key) for key in keys]] for pk, keys in stored.reports.items()],
    }
    store_kept(_NAME, digest, count=len(stored.counts), data=zlib.compress(orjson.dumps(data)))


def read_stored_counts(digest: str) -> Stored | None:
    """The counts an earlier process stored under `digest`, else None."""
    data = read_kept(_NAME, digest)
    if data is None:
        return None
    try:
        raw = orjson.loads(zlib.decompress(data))

        def counts(rows: list[Any]) -> dict[PoolKey, dict[str, int]]:
            return {(d, p): {k: int(v) for k, v in entry.items()} for d, p, entry in rows}

        def device_keys(rows: list[Any]) -> frozenset[DeviceKey]:
            return frozenset((d, p, n) for d, p, n in rows)

        return Stored(
            counts=counts(raw["counts"]),
            unavailable={(d, p): int(n) for d, p, n in raw["unavailable"]},
            side_counts=counts(raw["side_counts"]),
            flagged=device_keys(raw["flagged"]),
            pools_of={int(pk): frozenset((d, p) for d, p in keys) for pk, keys in raw["pools_of"]},
            reports={int(pk): device_keys(keys) for pk, keys in raw["reports"]},
        )
    except (ValueError, TypeError, KeyError, IndexError, zlib.error, orjson.JSONDecodeError):
        # Only a row this code did not write can fail here: counting is correct.
        log.warning("stored pool counts unreadable; counting again", exc_info=True)
        return None
