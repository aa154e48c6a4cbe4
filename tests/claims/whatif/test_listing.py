"""The cluster listing: rows decoded once per version, identity kept, one cheap fingerprint."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from claims.models import ResourceClaim
from claims.whatif.listing import cluster_fingerprint, forget_cached_rows, list_cluster
from claims.whatif.service import what_if
from inventory.models import ResourceSlice
from inventory.sync import apply_events, upsert_events
from tests.claims.whatif.helpers import answer_keys, claim_object, claim_yaml, device_keys, direct


def _name(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def _changed(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server would send it after an edit: new resourceVersion, new label."""
    changed = copy.deepcopy(obj)
    meta = changed["metadata"]
    meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1000)
    meta.setdefault("labels", {})["test/changed"] = "yes"
    return changed


def _node_local_slice(demo: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return next(
        s for s in demo["ResourceSlice"] if s["spec"].get("nodeName") and s["spec"].get("devices")
    )


def _fresh_read() -> Any:
    forget_cached_rows()
    return list_cluster()


@pytest.mark.django_db
def test_unchanged_rows_keep_their_objects(demo) -> None:
    """A second read returns the very same objects when nothing changed."""
    first = list_cluster()
    second = list_cluster()
    assert second.fingerprint == first.fingerprint
    assert all(a is b for a, b in zip(first.slices, second.slices, strict=True))
    assert all(a is b for a, b in zip(first.nodes, second.nodes, strict=True))
    assert all(a is b for a, b in zip(first.allocated_claims, second.allocated_claims, strict=True))


@pytest.mark.django_db
def test_a_changed_slice_is_read_again_and_only_it(demo) -> None:
    """After one slice changes, only that slice is a new object and it carries the change."""
    first = list_cluster()
    target = _node_local_slice(demo)
    upsert_events("ResourceSlice", [(_changed(target), None)], publish=False)
    second = list_cluster()
    assert second.fingerprint != first.fingerprint
    renewed = [
        _name(new) for old, new in zip(first.slices, second.slices, strict=True) if old is not new
    ]
    assert renewed == [_name(target)]
    after = next(s for s in second.slices if _name(s) == _name(target))
    assert after["metadata"]["labels"]["test/changed"] == "yes"
    assert second.slices == _fresh_read().slices


@pytest.mark.django_db
def test_deleted_and_changed_rows_match_a_fresh_read(demo) -> None:
    """Deleting a slice and changing a claim gives what a read without cached rows gives."""
    list_cluster()
    gone = _node_local_slice(demo)
    apply_events("ResourceSlice", [("DELETED", gone)], publish=False)
    allocated = next(c for c in demo["ResourceClaim"] if (c.get("status") or {}).get("allocation"))
    released = _changed(allocated)
    released.pop("status")
    upsert_events("ResourceClaim", [(released, None)], publish=False)
    cached = list_cluster()
    assert _name(gone) not in {_name(s) for s in cached.slices}
    assert _name(released) not in {_name(c) for c in cached.allocated_claims}
    fresh = _fresh_read()
    assert cached.fingerprint == fresh.fingerprint
    assert cached.nodes == fresh.nodes
    assert cached.slices == fresh.slices
    assert cached.allocated_claims == fresh.allocated_claims
    assert cached.classic_claims == fresh.classic_claims


@pytest.mark.django_db
def test_allocated_claims_keep_their_results(demo) -> None:
    """Each allocated claim read carries exactly the stored allocation results."""
    state = list_cluster()
    stored = {
        (ns, name): (obj.get("status") or {})["allocation"]["devices"]["results"]
        for ns, name, obj, classic in ResourceClaim.objects.filter(
            allocated_count__gt=0
        ).values_list("namespace", "name", "obj", "classic")
        if not classic
    }
    read = {
        (c["metadata"]["namespace"], c["metadata"]["name"]): c["status"]["allocation"]["devices"][
            "results"
        ]
        for c in state.allocated_claims
    }
    assert stored and read == stored


@pytest.mark.django_db
def test_fingerprint_follows_writes_only(demo) -> None:
    """The fingerprint changes on an update, a creation and a deletion, not on a diagnosis.

    Deleting the row just created brings back the earlier content, but versions only grow: a
    new fingerprint (one listing more, never a stale one).
    """
    start = cluster_fingerprint()
    assert cluster_fingerprint() == start
    ResourceClaim.objects.filter(pk=ResourceClaim.objects.first().pk).update(
        diagnosis={"fits": False}
    )
    assert cluster_fingerprint() == start
    target = _node_local_slice(demo)
    upsert_events("ResourceSlice", [(_changed(target), None)], publish=False)
    updated = cluster_fingerprint()
    assert updated != start
    extra = _changed(target)
    extra["metadata"]["name"] = f"{_name(target)}-extra"
    extra["metadata"]["uid"] = f"{extra['metadata'].get('uid', '')}-extra"
    upsert_events("ResourceSlice", [(extra, None)], publish=False)
    created = cluster_fingerprint()
    assert created not in (start, updated)
    apply_events("ResourceSlice", [("DELETED", extra)], publish=False)
    assert ResourceSlice.objects.filter(name=_name(extra)).count() == 0
    deleted = cluster_fingerprint()
    assert deleted not in (start, updated, created)
    older = next(s for s in demo["ResourceSlice"] if _name(s) != _name(target))
    apply_events("ResourceSlice", [("DELETED", older)], publish=False)
    assert cluster_fingerprint() not in (start, updated, created, deleted)


@pytest.mark.django_db
def test_what_if_after_a_change_matches_the_allocator(demo) -> None:
    """A what-if asked again after a slice changed answers for the changed cluster."""
    text = claim_yaml()
    what_if(text, use_cache=False)
    target = _node_local_slice(demo)
    shrunk = _changed(target)
    shrunk["spec"]["devices"] = shrunk["spec"]["devices"][:1]
    upsert_events("ResourceSlice", [(shrunk, None)], publish=False)
    answer = what_if(text, use_cache=False)
    expected = direct([claim_object(text)])
    for entry in answer["nodes"]:
        want = expected[entry["node"]]
        assert entry["fits"] == (want["results"] is not None), entry["node"]
        if entry["fits"]:
            assert answer_keys(entry) == device_keys(want["results"])


def _isolated_fresh_read() -> Any:
    """A read with empty row caches, leaving the kept ones as they were."""
    from claims.whatif import listing

    kept = dict(listing._row_caches)
    listing._row_caches.clear()
    try:
        return list_cluster()
    finally:
        listing._row_caches.clear()
        listing._row_caches.update(kept)


@pytest.mark.django_db
@pytest.mark.parametrize("seed", [3, 4])
def test_reads_from_recent_writes_match_a_fresh_read(demo, seed, monkeypatch) -> None:
    """Reads after a change list only the rows written lately when they can (claims released,
    slices changed), and whatever the change (deletions, claims allocated again) equal a read
    made from scratch."""
    from claims.whatif.rows import RowCache
    from tests.claims.whatif.test_follow import Cluster

    answered: list[bool] = []
    recent = RowCache._recent

    def counting(self, *args, **kwargs):
        out = recent(self, *args, **kwargs)
        answered.append(out is not None)
        return out

    monkeypatch.setattr(RowCache, "_recent", counting)
    cluster = Cluster(demo, seed)
    list_cluster()
    for _ in range(25):
        what = cluster.change()
        read, fresh = list_cluster(), _isolated_fresh_read()
        for part in ("nodes", "classes", "slices", "allocated_claims", "classic_claims"):
            assert getattr(read, part) == getattr(fresh, part), (what, part)
    # Most reads were answered from the recent writes; deletions and joins listed the table.
    assert answered.count(True) >= 10
    assert False in answered
