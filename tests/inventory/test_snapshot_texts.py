"""An import writes each object's JSON text as it read it, dumping it once, not again per column
(SQLite; PostgreSQL's paths dump their own, and store the same objects)."""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

import pytest
from django.db import connection

from demo.generator import generate_demo_cluster
from dralib.kube.normalize import normalize
from inventory.snapshot import SnapshotError, import_texts
from inventory.sync import HANDLERS
from inventory.sync import core as sync_core


@pytest.fixture
def demo() -> list[dict[str, Any]]:
    return generate_demo_cluster(nodes=6, seed=3)


def _text(objects: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})


def _loaded(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value  # jsonb comes decoded


def _stored_texts() -> dict[tuple[str, str], tuple[Any, Any]]:
    """(kind, uid) -> (raw, obj) as the database holds them, for kinds stored whole."""
    found = {}
    with connection.cursor() as cursor:
        for kind, handler in HANDLERS.items():
            if handler.redact is not None:
                continue
            table = connection.ops.quote_name(handler.model._meta.db_table)
            cursor.execute(f"SELECT uid, raw, obj FROM {table}")
            for uid, raw, obj in cursor.fetchall():
                found[(kind, uid)] = (raw, obj)
    return found


@pytest.mark.django_db
def test_stored_texts_are_the_objects_read_and_normalized(demo, monkeypatch):
    """Every stored object of a kind kept whole holds the object as written and as normalized,
    and on SQLite none of them is dumped again by the writer (object-level dumps counted)."""
    dumped_objects = []
    real = sync_core._fast_json

    def counting(value: Any) -> bytes | str:
        if isinstance(value, dict) and "metadata" in value and "kind" in value:
            dumped_objects.append(value["kind"])
        return real(value)

    monkeypatch.setattr(sync_core, "_fast_json", counting)
    expected = {}
    for item in demo:
        if HANDLERS.get(item["kind"]) is None or HANDLERS[item["kind"]].redact is not None:
            continue
        normalized = normalize(copy.deepcopy(item), validate=True)
        expected[(item["kind"], item["metadata"]["uid"])] = (item, normalized)
    assert {kind for kind, _ in expected} >= {"Node", "ResourceSlice", "ResourceClaim"}

    import_texts([("demo.json", _text(demo))])

    stored = _stored_texts()
    assert set(stored) == set(expected)
    for key, (raw, obj) in stored.items():
        assert (_loaded(raw), _loaded(obj)) == expected[key], key
    if connection.vendor == "sqlite":
        assert [kind for kind in dumped_objects if HANDLERS[kind].redact is None] == []
    assert sync_core._KNOWN_TEXTS.by_metadata == {}


@pytest.mark.django_db
def test_no_text_is_kept_after_a_reimport_or_a_failed_import(demo):
    """Objects a re-import leaves unchanged, and a failed import's, keep no remembered text."""
    import_texts([("demo.json", _text(demo))])
    before = _stored_texts()
    assert import_texts([("demo.json", _text(demo))]).result.unchanged == len(demo)
    assert sync_core._KNOWN_TEXTS.by_metadata == {}
    assert _stored_texts() == before
    broken = copy.deepcopy(demo)
    broken.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "Bad_Name"}})
    with pytest.raises(SnapshotError, match="metadata.name"):
        import_texts([("broken.json", _text(broken))])
    assert sync_core._KNOWN_TEXTS.by_metadata == {}
    assert _stored_texts() == before


def test_a_remembered_text_is_seen_only_by_the_thread_that_remembered_it() -> None:
    """A watcher or request writing beside an import dumps its own objects, even a shallow copy
    of one the import remembered; the import's thread takes the remembered text."""
    obj = {"metadata": {"name": "a"}, "spec": {"x": 1}}
    sync_core.remember_json_text(obj, b'{"remembered":true}')
    try:
        seen: list[str] = []
        other = threading.Thread(target=lambda: seen.append(sync_core._json_text(dict(obj))))
        other.start()
        other.join()
        assert seen == ['{"metadata":{"name":"a"},"spec":{"x":1}}']
        assert sync_core._json_text(dict(obj)) == '{"remembered":true}'
    finally:
        sync_core.forget_json_texts()
