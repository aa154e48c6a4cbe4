"""A fake Kubernetes API server: the sync's test double and the built-in demo cluster.

It speaks the real JSON wire format (discovery, paginated lists, chunked watches with bookmarks,
410 Expired after compaction) over HTTP on 127.0.0.1, so the official client talks to it exactly as
to kube-apiserver. The built-in demo cluster runs on it: `python -m demo --help`.
"""

from dralib.kube.fakeapi.churn import Churn, ChurnLoop, apply_object, convert_for_served
from dralib.kube.fakeapi.faults import FAULT_KINDS, Fault, FaultKind, Verb
from dralib.kube.fakeapi.resources import (
    DRA_GROUP,
    DRA_PLURALS_BY_VERSION,
    DRA_VERSIONS,
    RESOURCES,
    ResourceType,
    resource_type,
)
from dralib.kube.fakeapi.server import FakeApiServer, RequestRecord
from dralib.kube.fakeapi.store import Backup, Expired, ObjectStore

__all__ = [
    "DRA_GROUP",
    "DRA_PLURALS_BY_VERSION",
    "DRA_VERSIONS",
    "FAULT_KINDS",
    "RESOURCES",
    "Backup",
    "Churn",
    "ChurnLoop",
    "Expired",
    "FakeApiServer",
    "Fault",
    "FaultKind",
    "ObjectStore",
    "RequestRecord",
    "ResourceType",
    "Verb",
    "apply_object",
    "convert_for_served",
    "resource_type",
]
