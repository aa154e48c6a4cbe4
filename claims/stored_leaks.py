"""The leaks kept in the database across restarts, under the table versions they were read at.

Reading every leak from scratch is part of a web process's start-up work (`console.serve`'s
warm-up); a new process whose tables are at the versions an earlier one read them at (no
transaction committed a write since: `inventory.versions`) takes that process's leaks instead.
What is stored is what `claims.leaks` keeps to follow later changes (each leak with its claim,
and a reservation's with its pod), under a digest of the versions, the threshold, whether pods
are known, and the code that found them (`sources_digest`): under another digest nothing is
used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import zlib
from collections.abc import Callable, Sequence
from dataclasses import astuple
from pathlib import Path
from typing import Any, TypeVar

import orjson
from django.utils.dateparse import parse_datetime

from claims.devices.stored import read_kept, sources_digest, store_kept
from inventory.versions import is_private

__all__ = ["LEAKS_VERSION", "Parts", "leaks_digest", "read_stored_leaks", "store_leaks"]

log = logging.getLogger(__name__)

# Raised when what is stored changes meaning.
LEAKS_VERSION = 1
_NAME = "leaks"
_SOURCES = (Path(__file__).with_name("leaks.py"), Path(__file__))

L = TypeVar("L")
# unreserved (leak, claim pk), reserved (leak, claim pk, pod key), owned (leak, claim pk),
# in missing pools (leak, claim pk), claims with loose owners.
Parts = tuple[
    list[tuple[Any, int]],
    list[tuple[Any, int, tuple[str, str]]],
    list[tuple[Any, int]],
    list[tuple[Any, int]],
    frozenset[int],
]


def leaks_digest(fingerprint: Sequence[Any]) -> str | None:
    """The digest leaks read at `fingerprint` are stored under; None when a table's state is a
    transaction's own (its writes not yet committed: nobody else may use what it read)."""
    if is_private(fingerprint):
        return None
    text = json.dumps([LEAKS_VERSION, fingerprint], default=str)
    digest = hashlib.sha256(text.encode())
    digest.update(sources_digest(*_SOURCES).encode())
    return digest.hexdigest()


def store_leaks(digest: str, parts: Parts) -> None:
    """Keep the leaks read (`parts`) for the next process."""
    unreserved, reserved, owned, in_missing, loose = parts

    def row(leak: Any) -> list[Any]:
        return list(astuple(leak))

    data = {
        "unreserved": [[row(leak), pk] for leak, pk in unreserved],
        "reserved": [[row(leak), pk, list(pod)] for leak, pk, pod in reserved],
        "owned": [[row(leak), pk] for leak, pk in owned],
        "in_missing": [[row(leak), pk] for leak, pk in in_missing],
        "loose": sorted(loose),
    }
    store_kept(
        _NAME, digest, count=len(unreserved) + len(reserved), data=zlib.compress(orjson.dumps(data))
    )


def read_stored_leaks(digest: str, leak_type: Callable[..., L]) -> Parts | None:
    """The leaks an earlier process stored under `digest`, as `leak_type` instances."""
    data = read_kept(_NAME, digest)
    if data is None:
        return None
    try:
        stored = orjson.loads(zlib.decompress(data))

        def leak(values: list[Any]) -> L:
            kind, namespace, claim, detail, since, source, devices = values
            moment = parse_datetime(since) if isinstance(since, str) else None
            return leak_type(kind, namespace, claim, detail, moment, source, tuple(devices))

        return (
            [(leak(values), int(pk)) for values, pk in stored["unreserved"]],
            [(leak(values), int(pk), (pod[0], pod[1])) for values, pk, pod in stored["reserved"]],
            [(leak(values), int(pk)) for values, pk in stored["owned"]],
            [(leak(values), int(pk)) for values, pk in stored["in_missing"]],
            frozenset(int(pk) for pk in stored["loose"]),
        )
    except (ValueError, TypeError, KeyError, IndexError, zlib.error, orjson.JSONDecodeError):
        # Only a row this code did not write can fail here: reading the leaks is correct.
        log.warning("stored leaks unreadable; reading them again", exc_info=True)
        return None
