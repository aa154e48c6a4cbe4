"""The scheduler's Events for the demo's pods, as kube-scheduler records them (events.k8s.io/v1).

kube-scheduler reports through the events.k8s.io recorder as `default-scheduler`: a pod no node
takes gets a Warning `FailedScheduling` (action `Scheduling`) whose note is the message it also
writes to the pod's PodScheduled condition, and a bound pod a Normal `Scheduled` (action
`Binding`), "Successfully assigned <namespace>/<pod> to <node>". A retry with the same message
does not make a new event: the recorder's series counts it (`series.count`,
`series.lastObservedTime`). Event names are `<pod>.<hex nanoseconds>`, as the recorder names them.

The demo generator's objects keep their fixed demo times (a seed gives the same bytes); events
happen now, in real time, so that they live as long as kube-apiserver keeps events (an hour):
`SchedulerEvents` wraps the churn model and deletes its events past that age.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from dralib.kube.fakeapi.churn import Churn
from dralib.kube.fakeapi.store import Obj

SCHEDULER = "default-scheduler"
INSTANCE = "default-scheduler-demo-control-plane"
# kube-apiserver's --event-ttl default.
EVENT_TTL = timedelta(hours=1)
# Retries of still-pending pods recorded per churn step (the scheduler backs off; a 1,000-node
# demo has hundreds of pending pods).
RETRIES_PER_STEP = 10


def _micro(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _pending_message(pod: Obj) -> str | None:
    """The PodScheduled=False message of a pod waiting to be scheduled, or None."""
    if (pod.get("spec") or {}).get("nodeName"):
        return None
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or "")
    return None


def scheduler_event(
    pod: Obj, *, reason: str, note: str, moment: datetime, event_type: str, action: str
) -> Obj:
    """One events.k8s.io/v1 Event of kube-scheduler about `pod`."""
    meta = pod["metadata"]
    stamp = int(moment.timestamp() * 1_000_000_000)
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{stamp:x}", "namespace": meta["namespace"]},
        "eventTime": _micro(moment),
        "reportingController": SCHEDULER,
        "reportingInstance": INSTANCE,
        "action": action,
        "reason": reason,
        "type": event_type,
        "note": note,
        "regarding": {
            "kind": "Pod",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta.get("uid", ""),
            "apiVersion": "v1",
        },
    }


class SchedulerEvents:
    """A churn model that also records the scheduler's events for the pods the inner one
    creates, binds and leaves waiting (see the module docstring)."""

    def __init__(
        self, churn: Churn, *, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    ) -> None:
        self.churn = churn
        self.clock = clock
        # (namespace, pod) -> the pod, while it waits for a node.
        self.waiting: dict[tuple[str, str], Obj] = {}
        # (namespace, pod) -> its FailedScheduling event (gone once expired or bound).
        self.failing: dict[tuple[str, str], Obj] = {}
        # Events made, oldest first, to delete once older than EVENT_TTL.
        self.made: list[tuple[datetime, Obj]] = []
        self._retry = 0

    def initial(self, objects: list[Obj]) -> list[Obj]:
        """FailedScheduling for every waiting pod of a freshly loaded cluster."""
        out = []
        for obj in objects:
            if obj.get("kind") == "Pod":
                event = self._failed(obj)
                if event is not None:
                    out.append(event)
        return out

    def step(self) -> list[tuple[str, Obj]]:
        changes = self.churn.step()
        out = list(changes)
        for change, obj in changes:
            if obj.get("kind") == "Pod":
                out.extend(self._pod_changed(change, obj))
        out.extend(self._retries())
        out.extend(("DELETED", event) for event in self._expired())
        return out

    def _remember(self, event: Obj) -> Obj:
        self.made.append((self.clock(), event))
        return event

    def _failed(self, pod: Obj) -> Obj | None:
        message = _pending_message(pod)
        if message is None:
            return None
        meta = pod["metadata"]
        event = scheduler_event(
            pod,
            reason="FailedScheduling",
            note=message,
            moment=self.clock(),
            event_type="Warning",
            action="Scheduling",
        )
        key = (meta["namespace"], meta["name"])
        self.waiting[key] = pod
        self.failing[key] = event
        return self._remember(event)

    def _pod_changed(self, change: str, pod: Obj) -> list[tuple[str, Obj]]:
        meta = pod["metadata"]
        key = (meta["namespace"], meta["name"])
        if change == "DELETED":
            self.waiting.pop(key, None)
            self.failing.pop(key, None)
            return []
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            event = self._failed(pod) if change == "ADDED" else None
            return [("ADDED", event)] if event is not None else []
        if change == "MODIFIED" and key not in self.waiting:
            return []  # bound before: a status change, not a binding
        self.waiting.pop(key, None)
        self.failing.pop(key, None)
        note = f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}"
        scheduled = scheduler_event(
            pod,
            reason="Scheduled",
            note=note,
            moment=self.clock(),
            event_type="Normal",
            action="Binding",
        )
        return [("ADDED", self._remember(scheduled))]

    def _retries(self) -> list[tuple[str, Obj]]:
        """A few waiting pods are tried again (round robin): their event's series counts one
        more attempt, or a new event starts once the last one expired."""
        keys = sorted(self.waiting)
        if not keys:
            return []
        now = _micro(self.clock())
        out: list[tuple[str, Obj]] = []
        for offset in range(min(RETRIES_PER_STEP, len(keys))):
            key = keys[(self._retry + offset) % len(keys)]
            event = self.failing.get(key)
            if event is None:
                fresh = self._failed(self.waiting[key])
                if fresh is not None:
                    out.append(("ADDED", fresh))
                continue
            event = dict(event)
            count = int((event.get("series") or {}).get("count") or 1) + 1
            event["series"] = {"count": count, "lastObservedTime": now}
            self.failing[key] = event
            out.append(("MODIFIED", event))
        self._retry += RETRIES_PER_STEP
        return out

    def _expired(self) -> list[Obj]:
        cutoff = self.clock() - EVENT_TTL
        out = []
        while self.made and self.made[0][0] <= cutoff:
            _, event = self.made.pop(0)
            out.append(event)
        gone = {(e["metadata"]["namespace"], e["metadata"]["name"]) for e in out}
        for key, event in list(self.failing.items()):
            if (event["metadata"]["namespace"], event["metadata"]["name"]) in gone:
                del self.failing[key]
        return out
