"""The sync keeps the objects of pods that ask for extended resources backed by DRA, beside pods
with claims; every other pod is stored as its projection only."""

from __future__ import annotations

from typing import Any

from claims.models import Pod
from claims.pods import forget_dra_extended_names
from tests.claims.whatif.conftest import load_objects


def _pod(name: str, limits: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"limits": limits}}]
        },
        "status": {"phase": "Pending"},
    }


def kept() -> set[str]:
    """Pods whose whole object is stored."""
    return set(Pod.objects.filter(uses_claims=True).values_list("name", flat=True))


def test_pods_asking_for_dra_backed_resources_are_stored(small) -> None:
    """The class's extendedResourceName and the deviceclass prefix keep a pod's object; the
    others are stored as their projection, with an empty object."""
    forget_dra_extended_names()
    load_objects(
        [
            _pod("by-name", {"example.com/gpu": 1}),
            _pod("by-class", {"deviceclass.resource.kubernetes.io/gpu.example.com": 1}),
            _pod("plugin", {"vendor.io/fpga": 1}),
            _pod("plain", {"cpu": "1"}),
        ]
    )
    assert kept() == {"by-name", "by-class"}
    assert set(Pod.objects.values_list("name", flat=True)) == {
        "by-name",
        "by-class",
        "plugin",
        "plain",
    }
    plain = Pod.objects.get(name="plain")
    assert (plain.raw, plain.obj, plain.cpu_request) == ({}, {}, 1000)
    assert Pod.objects.get(name="plugin").other_requests == {"vendor.io/fpga": 1}


def test_a_new_class_is_seen_after_its_batch(small, django_capture_on_commit_callbacks) -> None:
    """A class synced later makes the next pod asking for its resource kept whole."""
    forget_dra_extended_names()
    load_objects([_pod("early", {"vendor.io/fpga": 1})])
    with django_capture_on_commit_callbacks(execute=True):
        load_objects(
            [
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "DeviceClass",
                    "metadata": {"name": "fpga", "uid": "uid-fpga"},
                    "spec": {"extendedResourceName": "vendor.io/fpga"},
                }
            ]
        )
    load_objects([_pod("late", {"vendor.io/fpga": 1})])
    assert kept() == {"late"}
