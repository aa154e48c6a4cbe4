"""PriorityClasses and PodDisruptionBudgets sync like LimitRanges: listed from scheduling.k8s.io/v1
and policy/v1, watched, their columns kept, deletions applied, exported and imported again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from claims.models import PodDisruptionBudget, PriorityClass
from inventory.snapshot import export_objects, import_files
from tests.inventory.sync.conftest import wait_converged

pytestmark = pytest.mark.django_db(transaction=True)


def priority_class(name: str, value: int, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **extra,
    }


def budget(name: str, namespace: str, *, allowed: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": name}}, **spec},
        "status": {
            "disruptionsAllowed": allowed,
            "currentHealthy": 2,
            "desiredHealthy": 2,
            "expectedPods": 2,
            "disruptedPods": {"web-0": "2026-01-01T00:00:00Z"},
        },
    }


def test_priority_classes_and_budgets_are_synced(server, watchers) -> None:
    """Both kinds reach their tables with value, default, policy, selector, bounds and the
    disruptions allowed, and follow updates and deletions."""
    server.apply(priority_class("high", 1000, preemptionPolicy="PreemptLowerPriority"))
    server.apply(priority_class("batch", -5, globalDefault=True, preemptionPolicy="Never"))
    server.apply(budget("web", "shop", allowed=0, minAvailable=2))
    server.apply(budget("db", "data", allowed=1, maxUnavailable="25%"))
    watchers.start("PriorityClass", "PodDisruptionBudget")
    wait_converged(server, "PriorityClass", "PodDisruptionBudget")
    classes = {
        name: (value, default, policy)
        for name, value, default, policy in PriorityClass.objects.values_list(
            "name", "value", "global_default", "preemption_policy"
        )
    }
    assert classes == {
        "high": (1000, False, "PreemptLowerPriority"),
        "batch": (-5, True, "Never"),
    }
    web = PodDisruptionBudget.objects.get(namespace="shop", name="web")
    assert (web.min_available, web.max_unavailable, web.disruptions_allowed) == ("2", "", 0)
    assert web.selector == {"matchLabels": {"app": "web"}}
    assert web.disrupted_pods == ["web-0"]
    db = PodDisruptionBudget.objects.get(namespace="data", name="db")
    assert (db.max_unavailable, db.disruptions_allowed) == ("25%", 1)

    server.apply(budget("web", "shop", allowed=1, minAvailable=1))
    server.delete("priorityclasses", name="batch")
    wait_converged(server, "PriorityClass", "PodDisruptionBudget")
    assert list(PriorityClass.objects.values_list("name", flat=True)) == ["high"]
    assert PodDisruptionBudget.objects.get(name="web").disruptions_allowed == 1


def test_snapshot_keeps_priority_classes_and_budgets(tmp_path: Path) -> None:
    """An imported snapshot stores both kinds; an export gives them back as they came."""
    documents = [
        priority_class("high", 1000),
        budget("web", "shop", allowed=0, minAvailable=1),
    ]
    for index, document in enumerate(documents):
        document["metadata"]["uid"] = f"uid-{index}"
        document["metadata"]["resourceVersion"] = "1"
    path = tmp_path / "snapshot.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    report = import_files([path])
    assert report.objects["PriorityClass"] == 1
    assert report.objects["PodDisruptionBudget"] == 1
    assert PriorityClass.objects.get().value == 1000
    exported = {obj["kind"]: obj for obj in export_objects()}
    assert exported["PriorityClass"]["value"] == 1000
    assert exported["PodDisruptionBudget"]["spec"]["minAvailable"] == 1
