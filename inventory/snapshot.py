"""Snapshot import and export: what `kubectl get ... -o yaml|json` prints, in and out.

Import is all or nothing, in one transaction: objects are written as they are read, and one
bad field anywhere rolls the import back with a message naming the file, document and field
(every object is still checked, so the message lists all the bad ones). A full import replaces
the kinds it covers; `merge` only adds and updates.

Files go through `dralib.kube.documents` (size, depth and value bounds, no YAML aliases,
UTF-8 only) one document at a time, and every object through the API server's validation
(`normalize(..., validate=True)`): a hand-edited snapshot cannot hold what a cluster could not.
Hand-written objects without `metadata.uid` get one derived from kind, namespace and name.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import orjson
from django.conf import settings
from django.db import connection, transaction

from dashboard.gcpause import gc_paused
from dashboard.live import publish_changes
from dralib.kube.documents import (
    DEFAULT_LIMITS,
    MAX_NODES,
    DocumentError,
    Limits,
    dump_yaml,
    stable_uid,
)
from dralib.kube.normalize import NormalizeError, normalize
from dralib.kube.normalize.schema import plain_when_read
from dralib.kube.streaming import iter_objects
from inventory.models import SnapshotImport
from inventory.sync import HANDLERS, BatchResult, Replacement
from inventory.sync.core import forget_json_texts, remember_json_text

# Kinds a dashboard user may find in a `kubectl get all -o yaml` dump that we deliberately do
# not track: reported, not rejected.
JSON = dict[str, Any]


# SQLite's page cache while an import writes, in KiB (the default is 2 MiB): the uid and name
# indexes of 100,000 objects take more, and every page evicted was read back from the file (a
# tenth of a 5,000-node import's CPU went to those reads, as system time).
IMPORT_CACHE_KIB = 96 * 1024


class SnapshotError(ValueError):
    """Input that cannot be imported; the message names file, document and field."""


def _dumped(item: Mapping[str, Any]) -> bytes | None:
    """`item` as JSON, or None for an integer past 64 bits (orjson's limit)."""
    try:
        return orjson.dumps(item)
    except TypeError:
        return None


@dataclass
class ImportReport:
    """What an import did: objects stored per kind, objects of tracked kinds a kind keeps out of
    the database, ignored (untracked) kinds, and the sync counts."""

    objects: Counter[str] = field(default_factory=Counter)
    ignored: Counter[str] = field(default_factory=Counter)
    not_stored: Counter[str] = field(default_factory=Counter)
    result: BatchResult = field(default_factory=BatchResult)

    def summary(self) -> str:
        parts = [f"{count} {kind}" for kind, count in sorted(self.objects.items())]
        text = "imported " + (", ".join(parts) if parts else "nothing")
        text += (
            f" ({self.result.upserted} written, {self.result.unchanged} unchanged,"
            f" {self.result.deleted} removed)"
        )
        if self.not_stored:
            dropped = ", ".join(
                f"{count} {kind}" for kind, count in sorted(self.not_stored.items())
            )
            text += f"; not stored because the dashboard does not keep them: {dropped}"
        if self.ignored:
            ignored = ", ".join(f"{count} {kind}" for kind, count in sorted(self.ignored.items()))
            text += f"; ignored kinds the dashboard does not track: {ignored}"
        return text


def import_limits() -> Limits:
    """Bounds on snapshot files: DASHBOARD_IMPORT_MAX_BYTES, and values in proportion.

    An imported file comes from the operator, not from the network, so its bound is the
    setting's; the other bounds stay those of any input (depth, documents). A value takes at
    least a few bytes of JSON or YAML (aliases are refused), so a bound on values of an eighth
    of the bytes never refuses a file the size bound admits.
    """
    max_bytes = settings.IMPORT_MAX_BYTES
    return Limits(max_bytes=max_bytes, max_nodes=max(MAX_NODES, max_bytes // 8))


def _objects(
    name: str, text: str | bytes, limits: Limits = DEFAULT_LIMITS
) -> Iterator[tuple[str, Any]]:
    """(where, object) for every object of one input, read one object at a time.

    The input is the caller's to give away: neither the text nor an object already yielded is
    kept here once parsed (a snapshot of hundreds of MB would otherwise be held several times);
    a JSON List is read item by item (`iter_objects`), never built whole.
    """
    objects = iter_objects(text, source=name, limits=limits)
    del text
    try:
        for index, path, item in objects:
            where = f"{name} document {index}"
            yield (f"{where} {path}" if path else where), item
    except DocumentError as exc:
        raise SnapshotError(str(exc)) from exc


def with_uid(item: Mapping[str, Any]) -> Mapping[str, Any]:
    """`item`, with a stable uid when a hand-written manifest has none.

    The uid is derived from kind, namespace and name, so importing the same file again updates
    the same rows instead of adding new ones.
    """
    meta = item.get("metadata")
    if not isinstance(meta, Mapping) or meta.get("uid") or not meta.get("name"):
        return item
    uid = stable_uid(
        kind=str(item.get("kind") or ""),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta["name"]),
    )
    return {**item, "metadata": {**meta, "uid": uid}}


def parse_texts(
    sources: Iterable[tuple[str, str | bytes]],
    report: ImportReport,
    *,
    limits: Limits = DEFAULT_LIMITS,
    remember_texts: bool = False,
) -> Iterator[tuple[str, JSON, JSON]]:
    """(kind, raw, normalized) of every object, read and normalized one at a time; once the
    input is read, SnapshotError listing the first problems if there were any.

    `remember_texts`: the JSON text made of an object that normalizing left as it was is
    handed to the writer (`remember_json_text`) for kinds that store the object as it is.

    After the first invalid object nothing more is handed out (the import is void), but every
    object is still checked, so that the message lists them all.
    """
    errors: list[str] = []
    # The same object twice in one import is ambiguous: which one should win?
    first_seen: dict[tuple[str, str, str], str] = {}
    uids: dict[str, str] = {}
    for name, text in sources:
        objects = _objects(name, text, limits)
        del text
        for where, item in objects:
            if not isinstance(item, Mapping):
                errors.append(f"{where}: expected an object, got {type(item).__name__}")
                continue
            kind = item.get("kind")
            if not isinstance(kind, str) or not kind:
                errors.append(f"{where}: kind: required")
                continue
            if kind not in HANDLERS:
                report.ignored[kind] += 1
                continue
            item = with_uid(item)
            # The object as written, dumped before normalizing may rewrite it in place: it is
            # this import's to give away, so normalizing need not copy it first.
            dumped = _dumped(item)
            # Read by `documents` within `limits`: whether its size alone keeps it within what
            # normalizing would copy, so that it need not be walked again to know it.
            bounded = dumped is not None and plain_when_read(
                max_depth=limits.max_depth, json_bytes=len(dumped)
            )
            try:
                owned = dumped is not None
                obj = normalize(item, validate=True, owned=owned, plain_already=bounded)
            except NormalizeError as exc:
                errors.append(f"{where}: {exc}")
                continue
            except RecursionError:
                errors.append(f"{where}: nested too deeply")
                continue
            except (ValueError, TypeError, KeyError) as exc:
                # A shape the checks above missed must still name the object, not crash.
                errors.append(f"{where}: {type(exc).__name__}: {exc}")
                continue
            meta = obj["metadata"]
            key = (obj["kind"], str(meta.get("namespace") or ""), str(meta["name"]))
            uid = str(meta.get("uid") or "")
            if key in first_seen or (uid and uid in uids):
                earlier = first_seen.get(key) or uids[uid]
                errors.append(
                    f"{where}: {key[0]} {'/'.join(p for p in key[1:] if p)} "
                    f"(uid {uid or '-'}) appears twice; also at {earlier}"
                )
                continue
            first_seen[key] = where
            if uid:
                uids[uid] = where
            if errors:
                continue
            raw: JSON = item  # an integer past 64 bits: normalize copied, the item is as written
            if dumped is not None:
                # Normalizing changed nothing (the same text, as for a v1 object the API server
                # wrote): one value serves as both, which the writer only reads.
                if _dumped(obj) == dumped:
                    raw = obj
                    if remember_texts and HANDLERS[kind].redact is None:
                        # Its raw and obj columns: the writer would dump it once more.
                        remember_json_text(obj, dumped)
                else:
                    raw = orjson.loads(dumped)
            yield obj["kind"], raw, obj
    if errors:
        shown = "\n".join(f"  {e}" for e in errors[:20])
        more = f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        raise SnapshotError(
            f"{len(errors)} invalid object(s); nothing was imported:\n{shown}{more}"
        )


def import_texts(
    sources: Iterable[tuple[str, str | bytes]],
    *,
    merge: bool = False,
    limits: Limits = DEFAULT_LIMITS,
) -> ImportReport:
    """Import objects from (name, text) pairs in one transaction.

    Each object is written (in segments, per kind) as soon as it is read and validated, so no
    more than a segment per kind is held; an invalid object anywhere rolls back what was
    written before it.
    """
    report = ImportReport()
    given: Counter[str] = Counter()
    # Reading and writing make many containers and next to no cycles: collections would walk
    # them again and again for nothing.
    # On SQLite the writer takes the objects' texts as read (PostgreSQL's paths dump their own).
    remember = connection.vendor == "sqlite"
    with gc_paused(), bulk_load(), transaction.atomic(), _texts_forgotten():
        kinds: dict[str, Replacement] = {}
        objects = parse_texts(sources, report, limits=limits, remember_texts=remember)
        for kind, raw, obj in objects:
            replacement = kinds.get(kind)
            if replacement is None:
                replacement = kinds[kind] = Replacement(kind, keep_missing=merge)
            replacement.add(raw, obj)
            given[kind] += 1
        # Inventory first, as the kinds are registered, so that the removals, pools and hooks
        # of claims and pods run on a complete picture within the same commit.
        for kind in [kind for kind in HANDLERS if kind in kinds]:
            # Published once at the end, coarsely: per-id events of a whole snapshot are
            # larger than any page needs.
            batch = kinds.pop(kind).finish(publish=False)
            report.result.merge(batch)
            # Count what was stored: a kind may keep some objects out (every pod is stored, the
            # ones without claims as a slim projection).
            stored = batch.upserted + batch.unchanged
            report.objects[kind] = stored
            if given[kind] - stored - len(batch.skipped) > 0:
                report.not_stored[kind] = given[kind] - stored - len(batch.skipped)
        if report.result.skipped:
            # Raising inside the transaction rolls back everything this import wrote.
            shown = "\n".join(f"  {e}" for e in report.result.skipped[:20])
            raise SnapshotError(
                f"{len(report.result.skipped)} object(s) could not be stored; "
                f"nothing was imported:\n{shown}"
            )
        record_import(report, merge=merge)
    return report


@contextmanager
def _texts_forgotten() -> Iterator[None]:
    """Texts remembered for objects the import did not write (kept out, failed) go at the end."""
    try:
        yield
    finally:
        forget_json_texts()


@contextmanager
def bulk_load() -> Iterator[None]:
    """A larger SQLite page cache for this connection while an import runs, restored after.

    Only the cache: journaling and syncing stay as they are, so a server reading the same
    file meanwhile, or a crash, finds it as safe as after any other write.
    """
    if connection.vendor != "sqlite":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA cache_size")
        (before,) = cursor.fetchone()
        cursor.execute(f"PRAGMA cache_size = {-IMPORT_CACHE_KIB}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA cache_size = {int(before)}")


def record_import(report: ImportReport, *, merge: bool) -> None:
    """Note the import (the freshness of what no watcher keeps current) and, after the commit,
    tell open pages: every topic the import changed, as "*", and the sync state.

    The command runs in a process of its own: with Redis these events reach the browsers;
    without, the pages notice the new import through the freshness they poll.
    """
    SnapshotImport.objects.create(merge=merge, stored=dict(report.objects))
    kept = SnapshotImport.objects.values_list("pk", flat=True)[SnapshotImport.KEPT :]
    SnapshotImport.objects.filter(pk__in=list(kept)).delete()
    changed = {topic: ["*"] for topic, ids in report.result.changed.items() if ids}
    publish_changes({**changed, "sync": ["*"]})


def import_files(paths: Iterable[str | Path], *, merge: bool = False) -> ImportReport:
    """Import YAML/JSON files in one transaction; SnapshotError names an unreadable file.

    Each file is read when its turn comes and let go once parsed.
    """
    return import_texts(_read_files(list(paths)), merge=merge, limits=import_limits())


def _read_files(paths: list[str | Path]) -> Iterator[tuple[str, bytes]]:
    for path in paths:
        path = Path(path)
        try:
            # Refuse an oversized file before reading it; decoding errors come with a line.
            limit = settings.IMPORT_MAX_BYTES
            if path.stat().st_size > limit:
                size = path.stat().st_size
                raise DocumentError(
                    f"file is {size} bytes, more than the limit of {limit} "
                    "(DASHBOARD_IMPORT_MAX_BYTES)",
                    source=str(path),
                )
            # Held in a list so the yield hands the bytes over: this frame keeps no reference
            # while the parser decodes them, so they go as soon as they are text.
            data = [path.read_bytes()]
        except DocumentError as exc:
            raise SnapshotError(str(exc)) from exc
        except OSError as exc:
            raise SnapshotError(f"{path}: cannot read: {exc}") from exc
        yield str(path), data.pop()


def export_objects() -> list[JSON]:
    """Every stored object, as the API server sent it, in a stable order."""
    objects: list[JSON] = []
    for handler in HANDLERS.values():
        if handler.export is not None:
            objects.extend(handler.export())
            continue
        ordering = ["namespace", "name"] if handler.namespaced else ["name"]
        objects.extend(handler.model.objects.order_by(*ordering).values_list("raw", flat=True))
    return objects


def write_snapshot(out: TextIO, *, fmt: str = "yaml") -> int:
    """Write every stored object as one v1 List in YAML or JSON; returns how many."""
    objects = export_objects()
    document = {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": objects}
    if fmt == "json":
        json.dump(document, out, indent=2, sort_keys=False)
        out.write("\n")
    elif fmt == "yaml":
        dump_yaml(document, out)
    else:
        raise SnapshotError(f"unknown format {fmt!r} (yaml or json)")
    return len(objects)
