"""The demo records kube-scheduler's events: FailedScheduling for waiting pods (counted as a series
on retries), Scheduled when a pod is bound, and none kept past kube-apiserver's event TTL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from demo.churn import DemoChurn
from demo.events import EVENT_TTL, SchedulerEvents
from demo.generator import generate_demo_cluster
from demo.server import load_demo
from dralib.kube.fakeapi import FakeApiServer
from dralib.kube.fakeapi.churn import ChurnLoop
from dralib.kube.normalize import normalize


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def waiting_pods(objects: list[dict[str, Any]]) -> dict[str, str]:
    out = {}
    for obj in objects:
        if obj["kind"] != "Pod" or obj["spec"].get("nodeName"):
            continue
        for condition in obj["status"].get("conditions") or []:
            if condition["type"] == "PodScheduled" and condition["status"] == "False":
                out[obj["metadata"]["name"]] = condition["message"]
    return out


def test_waiting_pods_get_the_schedulers_failed_scheduling() -> None:
    """Each pod the generated cluster leaves waiting gets one Warning FailedScheduling from
    default-scheduler whose note is its PodScheduled message; the events normalize."""
    objects = generate_demo_cluster(nodes=10, seed=3)
    events = SchedulerEvents(DemoChurn(objects, seed=3), clock=Clock()).initial(objects)
    waiting = waiting_pods(objects)
    assert waiting and {e["regarding"]["name"]: e["note"] for e in events} == waiting
    for event in events:
        assert (event["type"], event["reason"], event["action"]) == (
            "Warning",
            "FailedScheduling",
            "Scheduling",
        )
        assert event["reportingController"] == "default-scheduler"
        assert event["metadata"]["name"].startswith(event["regarding"]["name"] + ".")
        # As the API server stores it (with the uid it gives), the sync's normalizer reads it.
        stored = {**event, "metadata": {**event["metadata"], "uid": "uid-1"}}
        assert normalize(stored)["regarding"]["kind"] == "Pod"


def test_churn_binds_with_scheduled_retries_as_series_and_expires_after_an_hour() -> None:
    """Over churn steps: a bound pod that waited gets Scheduled ("Successfully assigned"),
    retries raise a FailedScheduling's series count, and an hour on every event made before
    is deleted."""
    objects = generate_demo_cluster(nodes=10, seed=3)
    clock = Clock()
    churn = SchedulerEvents(DemoChurn(objects, seed=3), clock=clock)
    first = churn.initial(objects)
    seen: list[tuple[str, dict[str, Any]]] = []
    for _ in range(60):
        clock.now += timedelta(seconds=15)
        seen.extend(change for change in churn.step() if change[1]["kind"] == "Event")
    scheduled = [e for kind, e in seen if kind == "ADDED" and e["reason"] == "Scheduled"]
    assert scheduled
    for event in scheduled:
        regarding = event["regarding"]
        assert event["note"].startswith(
            f"Successfully assigned {regarding['namespace']}/{regarding['name']} to "
        )
        assert (event["type"], event["action"]) == ("Normal", "Binding")
    counts = [e["series"]["count"] for kind, e in seen if kind == "MODIFIED"]
    assert counts and max(counts) >= 3
    assert not [e for kind, e in seen if kind == "DELETED"]
    clock.now += EVENT_TTL
    deleted = {e["metadata"]["name"] for kind, e in churn.step() if kind == "DELETED"}
    made = {e["metadata"]["name"] for e in first} | {
        e["metadata"]["name"] for kind, e in seen if kind == "ADDED"
    }
    assert made <= deleted


def test_the_served_demo_carries_the_events() -> None:
    """`load_demo` stores the waiting pods' events on the fake API server and its churn loop
    adds more."""
    with FakeApiServer() as server:
        churn = load_demo(server, nodes=10, seed=3)
        before = server.objects("events")
        assert {e["reason"] for e in before} == {"FailedScheduling"}
        loop = ChurnLoop(server, churn, interval=60)
        for _ in range(30):
            loop.run_once()
        assert len(server.objects("events")) > len(before)
