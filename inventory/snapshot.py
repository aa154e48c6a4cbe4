"""Snapshot import and export: what `kubectl get ... -o yaml|json` prints, in and out.

Import is all or nothing: every document is parsed and normalized first, and one bad field
anywhere aborts the import with a message naming the file, document and field, before anything
is written. A full import replaces the kinds it covers; `merge` only adds and updates.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml
from django.db import transaction

from dashboard.gcpause import gc_paused
from inventory.kube.normalize import NormalizeError, normalize
from inventory.sync import HANDLERS, BatchResult, replace_all, upsert_events

# Kinds a dashboard user may find in a `kubectl get all -o yaml` dump that we deliberately do
# not track: reported, not rejected.
JSON = dict[str, Any]


class SnapshotError(ValueError):
    """Input that cannot be imported; the message names file, document and field."""


@dataclass
class ParsedObject:
    """One object of the input: where it came from, as written, and normalized to v1."""

    source: str  # "file.yaml document 3 item 12"
    raw: JSON
    obj: JSON


@dataclass
class ImportReport:
    """What an import did: objects per kind, ignored (untracked) kinds, and the sync counts."""

    objects: Counter[str] = field(default_factory=Counter)
    ignored: Counter[str] = field(default_factory=Counter)
    result: BatchResult = field(default_factory=BatchResult)

    def summary(self) -> str:
        parts = [f"{count} {kind}" for kind, count in sorted(self.objects.items())]
        text = "imported " + (", ".join(parts) if parts else "nothing")
        text += (
            f" ({self.result.upserted} written, {self.result.unchanged} unchanged,"
            f" {self.result.deleted} removed)"
        )
        if self.ignored:
            ignored = ", ".join(f"{count} {kind}" for kind, count in sorted(self.ignored.items()))
            text += f"; ignored kinds the dashboard does not track: {ignored}"
        return text


def _documents(name: str, text: str) -> Iterator[tuple[int, Any]]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            yield 1, json.loads(text)
        except json.JSONDecodeError as exc:
            raise SnapshotError(f"{name}: invalid JSON at line {exc.lineno}: {exc.msg}") from exc
        except RecursionError as exc:
            raise SnapshotError(f"{name}: nested too deeply") from exc
        return
    try:
        for index, document in enumerate(yaml.safe_load_all(text), start=1):
            if document is not None:
                yield index, document
    except RecursionError as exc:
        raise SnapshotError(f"{name}: nested too deeply") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SnapshotError(f"{name}: invalid YAML{where}: {problem}") from exc


def _items(document: Any, where: str) -> Iterator[tuple[str, Any]]:
    if isinstance(document, list):
        for index, item in enumerate(document):
            yield f"{where} item {index}", item
        return
    if not isinstance(document, Mapping):
        raise SnapshotError(
            f"{where}: expected a Kubernetes object or List, got {type(document).__name__}"
        )
    kind = document.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and "items" in document:
        items = document.get("items") or []
        if not isinstance(items, list):
            raise SnapshotError(f"{where}: items: expected a list")
        for index, item in enumerate(items):
            # kubectl omits apiVersion/kind on items of typed lists (e.g. ResourceSliceList).
            if isinstance(item, dict) and "kind" not in item and kind != "List":
                item = {"apiVersion": document.get("apiVersion"), "kind": kind[:-4], **item}
            yield f"{where} items[{index}]", item
        return
    yield where, document


def parse_texts(sources: Iterable[tuple[str, str]], report: ImportReport) -> list[ParsedObject]:
    """Parse and normalize every object; raise SnapshotError listing the first problems."""

    parsed: list[ParsedObject] = []
    errors: list[str] = []
    # The same object twice in one import is ambiguous: which one should win?
    first_seen: dict[tuple[str, str, str], str] = {}
    uids: dict[str, str] = {}
    for name, text in sources:
        for doc_index, document in _documents(name, text):
            for where, item in _items(document, f"{name} document {doc_index}"):
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
                try:
                    obj = normalize(item)
                except NormalizeError as exc:
                    errors.append(f"{where}: {exc}")
                    continue
                except RecursionError:
                    errors.append(f"{where}: nested too deeply")
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
                parsed.append(ParsedObject(where, dict(item), obj))
    if errors:
        shown = "\n".join(f"  {e}" for e in errors[:20])
        more = f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        raise SnapshotError(
            f"{len(errors)} invalid object(s); nothing was imported:\n{shown}{more}"
        )
    return parsed


def import_texts(sources: Iterable[tuple[str, str]], *, merge: bool = False) -> ImportReport:
    """Import objects from (name, text) pairs in one transaction."""
    report = ImportReport()
    # Parsing builds the whole snapshot in memory; collections walking it cost seconds.
    with gc_paused():
        parsed = parse_texts(sources, report)
    by_kind: dict[str, list[ParsedObject]] = defaultdict(list)
    for item in parsed:
        by_kind[item.obj["kind"]].append(item)
    # Inventory first, so claims and pods land on a complete picture within the same commit.
    order = [kind for kind in HANDLERS if kind in by_kind]
    with transaction.atomic():
        for kind in order:
            items = by_kind[kind]
            report.objects[kind] = len(items)
            pairs = [(p.raw, p.obj) for p in items]
            if merge:
                report.result.merge(upsert_events(kind, pairs))
            else:
                report.result.merge(replace_all(kind, pairs))
        if report.result.skipped:
            # Raising inside the transaction rolls back everything this import wrote.
            shown = "\n".join(f"  {e}" for e in report.result.skipped[:20])
            raise SnapshotError(
                f"{len(report.result.skipped)} object(s) could not be stored; "
                f"nothing was imported:\n{shown}"
            )
    return report


def import_files(paths: Iterable[str | Path], *, merge: bool = False) -> ImportReport:
    """Import YAML/JSON files in one transaction; SnapshotError names an unreadable file."""
    sources = []
    for path in paths:
        path = Path(path)
        try:
            sources.append((str(path), path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            raise SnapshotError(f"{path}: cannot read: {exc}") from exc
    return import_texts(sources, merge=merge)


def export_objects() -> list[JSON]:
    """Every stored object, as the API server sent it, in a stable order."""
    objects: list[JSON] = []
    for handler in HANDLERS.values():
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
        yaml.safe_dump(document, out, sort_keys=False, default_flow_style=False)
    else:
        raise SnapshotError(f"unknown format {fmt!r} (yaml or json)")
    return len(objects)
