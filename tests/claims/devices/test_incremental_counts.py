"""The kept counts and leaks follow a change by reading what it touched: after every change of a
random sequence they equal a computation from scratch, and a one-pod change reads one pod
whatever the cluster's size."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

import pytest

from claims import leaks
from claims.devices import classes, counts
from claims.devices.classes import class_membership
from claims.devices.counts import forget_counts, pool_device_counts, unavailable_unhealthy
from claims.leaks import find_leaks, forget_leaks
from claims.models import Pod
from inventory.sync import apply_events, upsert_events
from tests.claims.devices.kept import forget_kept, fresh  # noqa: F401 (fresh: autouse)
from tests.console.demo import load_demo


def _synced_a_day_ago() -> None:
    """Every stored object as if synced a day ago: what is read again after a change (the
    writes within `classes.WRITE_MARGIN` of the kept newest one) is then what the test wrote."""
    from datetime import timedelta

    from django.apps import apps
    from django.db.models import F

    for model in apps.get_models():
        if any(field.name == "synced_at" for field in model._meta.get_fields()):
            model._default_manager.update(synced_at=F("synced_at") - timedelta(days=1))


JSON = dict[str, Any]


def _kept_now() -> tuple[dict, dict, list]:
    return pool_device_counts(), unavailable_unhealthy(), find_leaks()


def _from_scratch() -> tuple[dict, dict, list]:
    """Computed again from nothing, leaving the kept state (what the next change builds on) as
    it was."""
    kept = (counts._kept, leaks._kept, classes._holds)
    saved = [each._entry for each in kept]
    forget_counts()
    forget_leaks()
    classes._holds.forget()
    try:
        return _kept_now()
    finally:
        for each, entry in zip(kept, saved, strict=True):
            each._entry = entry


class _Cluster:
    """The demo cluster's objects as last written, and the writes a watcher would make."""

    def __init__(self, objects: dict[str, list[JSON]], rng: random.Random) -> None:
        self.rng = rng
        self.version = 50_000_000
        self.claims = {c["metadata"]["name"]: c for c in objects["ResourceClaim"]}
        self.allocated = {
            name: copy.deepcopy(c)
            for name, c in self.claims.items()
            if (c.get("status") or {}).get("allocation")
        }
        self.pods = {p["metadata"]["name"]: p for p in objects["Pod"]}
        self.slices = objects["ResourceSlice"]
        self.rules: list[JSON] = []
        self.removed: list[JSON] = []
        self.removed_slices: list[JSON] = []
        self.serial = 0

    def _write(self, kind: str, obj: JSON) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        upsert_events(kind, [(copy.deepcopy(obj), None)], publish=False)

    def release_claim(self) -> None:
        name = self.rng.choice(sorted(self.allocated))
        claim = copy.deepcopy(self.claims[name])
        claim["status"] = {}
        self.claims[name] = claim
        self._write("ResourceClaim", claim)

    def allocate_claim(self) -> None:
        name = self.rng.choice(sorted(self.allocated))
        self.claims[name] = copy.deepcopy(self.allocated[name])
        self._write("ResourceClaim", self.claims[name])

    def unreserve_claim(self) -> None:
        """Allocated, reserved for nobody: an unreserved leak once past the threshold."""
        name = self.rng.choice(sorted(self.allocated))
        claim = copy.deepcopy(self.allocated[name])
        claim["status"].pop("reservedFor", None)
        self.claims[name] = claim
        self._write("ResourceClaim", claim)

    def add_pod(self) -> None:
        template = self.pods[self.rng.choice(sorted(self.pods))]
        self.serial += 1
        pod = copy.deepcopy(template)
        pod["metadata"]["name"] = f"added-{self.serial}"
        pod["metadata"]["uid"] = f"uid-added-{self.serial}"
        self.pods[pod["metadata"]["name"]] = pod
        self._write("Pod", pod)

    def remove_pod(self) -> None:
        name = self.rng.choice(sorted(self.pods))
        pod = self.pods.pop(name)
        self.removed.append(pod)
        apply_events("Pod", [("DELETED", copy.deepcopy(pod))], publish=False)

    def restore_pod(self) -> None:
        """A removed pod back under its name: the same object, or a new pod (another uid)."""
        if not self.removed:
            return
        pod = copy.deepcopy(self.removed.pop(self.rng.randrange(len(self.removed))))
        if self.rng.random() < 0.5:
            self.serial += 1
            pod["metadata"]["uid"] = f"uid-again-{self.serial}"
        self.pods[pod["metadata"]["name"]] = pod
        self._write("Pod", pod)

    def report_unhealthy(self) -> None:
        pod = self.pods[self.rng.choice(sorted(self.pods))]
        key = self.rng.choice(sorted(class_membership().keys))
        status = pod.setdefault("status", {})
        status["phase"] = "Running"
        status["containerStatuses"] = [
            {
                "name": "main",
                "ready": True,
                "state": {"running": {"startedAt": "2026-06-01T10:00:00Z"}},
                "allocatedResourcesStatus": [
                    {
                        "name": "claim:gpus/gpu",
                        "resources": [{"resourceID": "/".join(key), "health": "Unhealthy"}],
                    }
                ],
            }
        ]
        self._write("Pod", pod)

    def finish_pod(self) -> None:
        pod = self.pods[self.rng.choice(sorted(self.pods))]
        pod.setdefault("status", {})["phase"] = self.rng.choice(["Succeeded", "Failed"])
        self._write("Pod", pod)

    def taint_slice(self) -> None:
        slice_ = self.rng.choice(self.slices)
        devices = slice_["spec"].get("devices") or []
        if not devices:
            return
        device = self.rng.choice(devices)
        effect = self.rng.choice(["NoSchedule", "NoExecute", None])
        if effect is None:
            device.pop("taints", None)
        else:
            device["taints"] = [{"key": "example.com/broken", "effect": effect}]
        self._write("ResourceSlice", slice_)

    def remove_slice(self) -> None:
        """A slice deleted: its pool may be gone, and the claims holding its devices leak."""
        if len(self.slices) < 2:
            return
        slice_ = self.slices.pop(self.rng.randrange(len(self.slices)))
        self.removed_slices.append(slice_)
        apply_events("ResourceSlice", [("DELETED", copy.deepcopy(slice_))], publish=False)

    def restore_slice(self) -> None:
        if self.removed_slices:
            slice_ = self.removed_slices.pop(self.rng.randrange(len(self.removed_slices)))
            self.slices.append(slice_)
            self._write("ResourceSlice", slice_)

    def taint_rule(self) -> None:
        if self.rules and self.rng.random() < 0.5:
            rule = self.rules.pop()
            apply_events("DeviceTaintRule", [("DELETED", rule)], publish=False)
            return
        driver, pool, device = self.rng.choice(sorted(class_membership().keys))
        self.serial += 1
        rule = {
            "apiVersion": "resource.k8s.io/v1alpha3",
            "kind": "DeviceTaintRule",
            "metadata": {"name": f"rule-{self.serial}", "uid": f"uid-rule-{self.serial}"},
            "spec": {
                "deviceSelector": {"driver": driver, "pool": pool, "device": device},
                "taint": {"key": "example.com/rule", "effect": "NoExecute"},
            },
        }
        self.rules.append(rule)
        self._write("DeviceTaintRule", rule)


CHANGES = (
    "release_claim",
    "allocate_claim",
    "unreserve_claim",
    "add_pod",
    "remove_pod",
    "restore_pod",
    "report_unhealthy",
    "finish_pod",
    "taint_slice",
    "remove_slice",
    "restore_slice",
    "taint_rule",
)


@pytest.mark.django_db
@pytest.mark.parametrize("seed", [1, 2])
def test_kept_counts_and_leaks_equal_scratch_after_every_change(seed: int, monkeypatch) -> None:
    """Claims released and allocated again, pods added, removed, reporting devices Unhealthy
    and finishing, slices' devices tainted, taint rules added and removed, in a random order:
    after each, the kept counts, unhealthy-unavailable counts and leaks equal a computation
    from scratch. Some of the leaks' readings followed the changed claims and pods alone."""
    followed: list[bool] = []
    real = leaks._follow

    def counted(*args: Any) -> Any:
        result = real(*args)
        followed.append(result is not None)
        return result

    monkeypatch.setattr(leaks, "_follow", counted)
    rng = random.Random(seed)
    cluster = _Cluster(load_demo(nodes=5, seed=seed), rng)
    assert _kept_now() == _from_scratch()
    done = []
    for _ in range(40):
        change = rng.choice(CHANGES)
        getattr(cluster, change)()
        done.append(change)
        assert _kept_now() == _from_scratch(), done
    # Several pods changed in a row before one reading, then one reading.
    for change in ("add_pod", "report_unhealthy", "remove_pod", "report_unhealthy"):
        getattr(cluster, change)()
    assert _kept_now() == _from_scratch()
    # Pods removed, then each restored alone: the owner and reservation leaks they caused go
    # away through the reading of the changed pods.
    for _ in range(3):
        cluster.remove_pod()
    _kept_now()
    kinds_before = {leak.kind for leak in find_leaks()}
    while cluster.removed:
        cluster.restore_pod()
        assert _kept_now() == _from_scratch()
    assert kinds_before  # the removed pods left leaks to follow
    assert any(followed)
    assert not all(followed)  # deletions and slice changes read everything


@pytest.mark.django_db
def test_a_one_pod_change_reads_one_pod_at_5_and_20_nodes(monkeypatch) -> None:
    """Every pod reports a device Unhealthy; after one pod changes, the kept counts read that
    pod and the one written last before it (read again: `synced_at` at or after the kept
    newest), as many pods at 20 nodes as at 5, where a reading from scratch reads every one."""
    read: list[int] = []
    real = Pod.from_db.__func__  # type: ignore[attr-defined]

    def counted(cls: type[Pod], *args: Any) -> Pod:
        pod = real(cls, *args)
        read.append(pod.pk)
        return pod

    monkeypatch.setattr(Pod, "from_db", classmethod(counted))
    seen: dict[int, tuple[int, int]] = {}
    for nodes, seed in ((5, 1), (20, 2)):
        forget_kept()
        cluster = _Cluster(load_demo(nodes=nodes, seed=seed), random.Random(seed))
        for _ in cluster.pods:
            cluster.report_unhealthy()
        _synced_a_day_ago()
        cluster.report_unhealthy()  # the kept state's newest write
        read.clear()
        pool_device_counts()
        from_scratch = len(read)
        cluster.report_unhealthy()
        read.clear()
        pool_device_counts()
        seen[nodes] = (from_scratch, len(read))
        assert _kept_now() == _from_scratch()
    assert seen[5][1] == seen[20][1] == 2
    assert seen[20][0] > seen[5][0] > 1


@pytest.mark.django_db
def test_a_one_pod_change_checks_its_own_leaks_at_5_and_20_nodes(monkeypatch) -> None:
    """Every pod has finished (each reservation a leak); after one pod changes, the kept leaks
    check again only the reservations and claims of the pods written since: as many leaks come
    back at 20 nodes as at 5, where a reading from scratch returns every one."""
    returned: list[int] = []
    real = leaks._reservation_leaks

    def counted(*args: Any) -> Iterator[Any]:
        for found in real(*args):
            returned.append(found[1])
            yield found

    monkeypatch.setattr(leaks, "_reservation_leaks", counted)
    seen: dict[int, tuple[int, int]] = {}
    for nodes, seed in ((5, 1), (20, 2)):
        forget_kept()
        cluster = _Cluster(load_demo(nodes=nodes, seed=seed), random.Random(seed))
        for name in sorted(cluster.pods):
            cluster.pods[name].setdefault("status", {})["phase"] = "Succeeded"
            cluster._write("Pod", cluster.pods[name])
        _synced_a_day_ago()
        cluster.finish_pod()  # the kept state's newest write
        returned.clear()
        find_leaks()
        from_scratch = len(returned)
        cluster.finish_pod()
        returned.clear()
        find_leaks()
        seen[nodes] = (from_scratch, len(returned))
        assert _kept_now() == _from_scratch()
    assert seen[5][1] == seen[20][1] <= 2
    assert seen[20][0] > seen[5][0] > 2


@pytest.mark.django_db
def test_a_one_claim_change_counts_its_pools_again_at_5_and_20_nodes(monkeypatch) -> None:
    """After one claim is released, the kept counts count again only the pools it held (the
    grouped queries are scoped to them), at 20 nodes as at 5; and equal a count from scratch."""
    scoped: list[int | None] = []
    real = counts._compute_counts

    def counted(**kwargs: Any) -> Any:
        pools = kwargs.get("pools")
        scoped.append(None if pools is None else len(pools))
        return real(**kwargs)

    monkeypatch.setattr(counts, "_compute_counts", counted)
    seen: dict[int, list[int | None]] = {}
    for nodes, seed in ((5, 1), (20, 2)):
        forget_kept()
        cluster = _Cluster(load_demo(nodes=nodes, seed=seed), random.Random(seed))
        name = sorted(cluster.allocated)[0]
        _synced_a_day_ago()
        # The kept state's newest write: the claim itself, written again unchanged.
        cluster._write("ResourceClaim", copy.deepcopy(cluster.claims[name]))
        pool_device_counts()
        held = {
            (result["driver"], result["pool"])
            for result in cluster.allocated[name]["status"]["allocation"]["devices"]["results"]
        }
        released = copy.deepcopy(cluster.claims[name])
        released["status"] = {}
        scoped.clear()
        cluster._write("ResourceClaim", released)
        pool_device_counts()
        seen[nodes] = list(scoped)
        assert scoped == [len(held)]
        assert _kept_now() == _from_scratch()
    assert seen[5] == seen[20] == [1]
