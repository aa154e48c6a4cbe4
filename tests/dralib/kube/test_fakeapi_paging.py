"""The fake API server's store pages from a key on: the same items as the whole list cut there,
at the current revision and at a past one (keys added and removed since)."""

from __future__ import annotations

from typing import Any

from dralib.kube.fakeapi import ObjectStore, resource_type

PODS = resource_type("pods")


def pod(name: str, namespace: str = "ns") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}}


def names(items: list[tuple[Any, dict[str, Any]]]) -> list[str]:
    return [obj["metadata"]["name"] for _, obj in items]


def test_pages_after_a_key_equal_the_list_cut_there() -> None:
    """`after` returns exactly the items whose keys sort after it, in order, also per namespace."""
    store = ObjectStore()
    for index in (5, 3, 9, 1, 7):
        store.apply(pod(f"p{index}"))
    store.apply(pod("p4", namespace="other"))
    _, everything = store.snapshot(PODS, namespace=None, at=None)
    assert names(everything) == ["p1", "p3", "p5", "p7", "p9", "p4"]
    _, rest = store.snapshot(PODS, namespace=None, at=None, after=("ns", "p3"))
    assert rest == [(k, o) for k, o in everything if k > ("ns", "p3")]
    _, mine = store.snapshot(PODS, namespace="ns", at=None, after=("ns", "p5"))
    assert names(mine) == ["p7", "p9"]


def test_a_past_revision_is_rebuilt_after_keys_changed() -> None:
    """A page at an older revision still sees a key deleted since and not one added since; the
    current list sees the change (the kept key order is renewed)."""
    store = ObjectStore()
    for index in range(1, 6):
        store.apply(pod(f"p{index}"))
    _, before = store.snapshot(PODS, namespace=None, at=None)
    revision = store.revision
    store.delete("pods", name="p2", namespace="ns")
    store.apply(pod("p0"))
    _, past = store.snapshot(PODS, namespace=None, at=revision, after=("ns", "p1"))
    assert names(past) == ["p2", "p3", "p4", "p5"]
    _, now = store.snapshot(PODS, namespace=None, at=None)
    assert names(now) == ["p0", "p1", "p3", "p4", "p5"]
    assert names(before) == ["p1", "p2", "p3", "p4", "p5"]


def test_a_page_is_cut_without_the_rest_of_the_list() -> None:
    """`page` gives `limit` items after the key and counts the rest, as the whole list would."""
    store = ObjectStore()
    for index in range(10):
        store.apply(pod(f"p{index}", namespace=f"ns-{index % 3}"))
    revision, everything = store.snapshot(PODS, namespace=None, at=None)
    _, page, remaining = store.page(PODS, at=revision, after=everything[2][0], limit=4)
    assert page == everything[3:7] and remaining == 3
    _, last, remaining = store.page(PODS, at=None, after=everything[7][0], limit=4)
    assert last == everything[8:] and remaining == 0
