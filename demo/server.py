"""The built-in demo cluster served by a FakeApiServer: generated objects plus their churn model,
and the scheduler's events for its pods."""

from __future__ import annotations

from demo.churn import DemoChurn
from demo.events import SchedulerEvents
from demo.generator import generate_demo_cluster
from demo.rbac import demo_rbac
from dralib.kube.fakeapi.churn import Churn, apply_object
from dralib.kube.fakeapi.server import FakeApiServer
from dralib.kube.fakeapi.store import Obj


def load_demo(server: FakeApiServer, *, nodes: int, seed: int) -> Churn:
    """Apply a generated demo cluster to `server`; returns the churn model that evolves it."""
    objects: list[Obj] = generate_demo_cluster(nodes=nodes, seed=seed)
    # Two teams with different rights: what each may see is what this RBAC lets them list.
    server.load_rbac(demo_rbac())
    for obj in objects:
        apply_object(server, obj)
    # The scheduler's events happen now, beside the generated objects' fixed demo times.
    churn = SchedulerEvents(DemoChurn(objects, seed=seed))
    for event in churn.initial(objects):
        apply_object(server, event)
    return churn
