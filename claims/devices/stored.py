"""The class membership's CEL outcomes kept in the database, so that a new web process does not
evaluate every class's selectors over every device again (1-1.5 s of CPU at 5,000 nodes).

What is kept is what `classes` keeps in memory to follow slice changes: each device's outcome
(the classes it belongs to, the runtime errors) and each slice's version (resourceVersion and
synced_at) as of the evaluation. A new process takes them as if it had computed them itself: the
devices of slices whose version differs now, or that are new, are evaluated again, the others
keep their outcome. So a change written while no process ran (another process, an import, a
sync in a worker) costs CEL over what it changed, and the first answer equals one from scratch.

The outcomes are valid only for the classes' selectors they were decided with, and for the code
that decided them: the row carries a digest of every class's name and selectors, of the CEL
adapter's and `classes`' source and the CEL libraries' versions (a deployment that changes how
a device is decided evaluates again), and of OUTCOMES_VERSION; under another digest nothing is
used.

`read_kept`, `store_kept` and `forget_kept` keep other values the same way, each a row of its
own under a digest of what it was computed from: the physical units (`units`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson
from django.db import DatabaseError, transaction
from django.utils import timezone

import dralib.allocator.cel
from claims.models import KeptMembership

__all__ = [
    "OUTCOMES_VERSION",
    "Outcome",
    "SliceVersion",
    "StoredOutcomes",
    "classes_digest",
    "forget_kept",
    "forget_stored_outcomes",
    "read_kept",
    "read_outcomes",
    "sources_digest",
    "store_kept",
    "store_outcomes",
]

log = logging.getLogger(__name__)

# Raised when what is stored changes meaning (the code's own changes are in `_code_digest`).
OUTCOMES_VERSION = 1
# The third-party distributions under the CEL adapter (cel_expr_python, re2): their versions
# count.
_CEL_LIBRARIES = ("cel-expr-python", "google-re2")
_NAME = "class-membership"

# One device's outcome: the classes it belongs to, and (class, message) of runtime errors.
Outcome = tuple[tuple[str, ...], tuple[tuple[str, str], ...]]
# A slice's resourceVersion and synced_at: either moves when the slice (its devices) is written.
SliceVersion = tuple[str, Any]


@dataclass(frozen=True)
class StoredOutcomes:
    """Outcomes by device pk and the versions of the slices they were decided on."""

    outcomes: Mapping[int, Outcome]
    slice_versions: Mapping[int, SliceVersion]


def classes_digest(classes: Iterable[tuple[str, Any]]) -> str:
    """A digest of the classes' names and selectors (what outcomes depend on), of the code that
    decides them and of OUTCOMES_VERSION."""
    text = json.dumps(
        [OUTCOMES_VERSION, _code_digest(), sorted(classes, key=lambda pair: pair[0])],
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()


@lru_cache(maxsize=1)
def _code_digest() -> str:
    """The source of the CEL adapter (with the quantity and semver types it uses) and of
    `classes`, and the CEL libraries' versions: read once per process (a few ms)."""
    allocator = Path(dralib.allocator.cel.__file__).resolve().parent.parent
    files = [
        *sorted((allocator / "cel").glob("*.py")),
        allocator / "quantity.py",
        allocator / "semver.py",
        Path(__file__).resolve().with_name("classes.py"),
    ]
    # Sources not shipped: a random digest, so this process's outcomes are used by nobody.
    digest = hashlib.sha256(sources_digest(*files).encode())
    for name in _CEL_LIBRARIES:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "unknown"
        digest.update(f"{name}={version}".encode())
    return digest.hexdigest()


def _instant(value: Any) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else None


def _encode(outcomes: Mapping[int, Outcome], slice_versions: Mapping[int, SliceVersion]) -> bytes:
    # Most devices share one of a few outcomes: each distinct one is written once.
    distinct: dict[Outcome, int] = {}
    of = [distinct.setdefault(outcome, len(distinct)) for outcome in outcomes.values()]
    payload = {
        "outcomes": [[list(matched), [list(e) for e in failed]] for matched, failed in distinct],
        "devices": list(outcomes),
        "of": of,
        "slices": list(slice_versions),
        "versions": [[rv, _instant(synced)] for rv, synced in slice_versions.values()],
    }
    return zlib.compress(orjson.dumps(payload), 1)


def _decode(data: bytes) -> StoredOutcomes:
    payload = orjson.loads(zlib.decompress(data))
    distinct: list[Outcome] = [
        (tuple(str(c) for c in matched), tuple((str(c), str(m)) for c, m in failed))
        for matched, failed in payload["outcomes"]
    ]
    devices, of = payload["devices"], payload["of"]
    slices, versions = payload["slices"], payload["versions"]
    if len(devices) != len(of) or len(slices) != len(versions):
        raise ValueError("stored outcomes: lists of unequal length")
    outcomes = {int(pk): distinct[index] for pk, index in zip(devices, of, strict=True)}
    slice_versions: dict[int, SliceVersion] = {
        int(pk): (str(rv), None if synced is None else datetime.fromisoformat(synced))
        for pk, (rv, synced) in zip(slices, versions, strict=True)
    }
    return StoredOutcomes(outcomes=outcomes, slice_versions=slice_versions)


def read_outcomes(digest: str) -> StoredOutcomes | None:
    """The stored outcomes when they were decided with the classes of `digest`, else None."""
    data = read_kept(_NAME, digest)
    if data is None:
        return None
    try:
        return _decode(data)
    except (ValueError, TypeError, KeyError, IndexError, zlib.error):
        # Only a row this code did not write can fail here: evaluating everything is correct.
        log.warning("stored class membership outcomes unreadable; evaluating again", exc_info=True)
        return None


def store_outcomes(
    digest: str, outcomes: Mapping[int, Outcome], slice_versions: Mapping[int, SliceVersion]
) -> bool:
    """Keep the outcomes for the next process; False when the write failed (a locked SQLite
    file, another process storing at once): only a later start pays for it."""
    return store_kept(_NAME, digest, count=len(outcomes), data=_encode(outcomes, slice_versions))


def forget_stored_outcomes() -> None:
    """Delete the stored outcomes (tests: the next computation in a new process is then one
    from scratch)."""
    forget_kept(_NAME)


def read_kept(name: str, digest: str) -> bytes | None:
    """The data kept as `name` when it was stored under `digest` (of everything it was computed
    from), else None."""
    row = KeptMembership.objects.filter(name=name, classes=digest).values_list("data").first()
    return None if row is None else bytes(row[0])


def store_kept(name: str, digest: str, *, count: int, data: bytes) -> bool:
    """Keep `data` as `name` under `digest` for the next process (`count`: how many devices it
    covers); False when the write failed."""
    try:
        # A savepoint: a failure leaves a caller's transaction usable (PostgreSQL).
        with transaction.atomic():
            KeptMembership.objects.update_or_create(
                name=name,
                defaults={
                    "classes": digest,
                    "stored_at": timezone.now(),
                    "devices": count,
                    "data": data,
                },
            )
    except DatabaseError:
        log.warning("could not store %s", name, exc_info=True)
        return False
    return True


def forget_kept(name: str) -> None:
    """Delete what is kept as `name`."""
    KeptMembership.objects.filter(name=name).delete()


def sources_digest(*paths: Path) -> str:
    """A digest of source files (the code a kept value was computed by), or a random one when
    they are not shipped: then what this process stores is used by nobody, and it uses none."""
    digest = hashlib.sha256()
    try:
        for path in paths:
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    except OSError:
        return uuid.uuid4().hex
    return digest.hexdigest()
