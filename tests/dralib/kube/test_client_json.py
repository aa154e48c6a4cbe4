"""`dralib.kube.client.loads`: integers past 64 bits come back exact, over real HTTP too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dralib.kube.client import KubeClient, load_client, loads
from dralib.kube.fakeapi import FakeApiServer

# Around each edge of orjson's 64 bits, and far past them.
EDGES = [
    2**63 - 1,
    2**63,
    2**64 - 1,
    2**64,
    -(2**63),
    -(2**63) - 1,
    10**30,
    -(10**30),
    2**70,
]


@pytest.mark.parametrize("value", EDGES)
def test_integers_are_exact_at_and_past_64_bits(value: int) -> None:
    """Every integer decodes to the same int, never a float."""
    decoded = loads(json.dumps({"metadata": {"name": "a"}, "data": {"size": value}}).encode())
    assert decoded["data"]["size"] == value
    assert type(decoded["data"]["size"]) is int


def test_digit_runs_elsewhere_read_the_same() -> None:
    """A 20-digit string and a long fraction, which take the json module's path, read as JSON."""
    text = b'{"name": "12345678901234567890", "ratio": 0.12345678901234567890123, "n": -1}'
    assert loads(text) == json.loads(text)
    assert loads(b'{"version": "-1234567890123456789x"}') == {"version": "-1234567890123456789x"}


def test_bad_json_is_a_value_error() -> None:
    """Text that is not JSON is a ValueError, whichever decoder read it."""
    for text in (b'{"a": ', b'{"a": 123456789012345678901234567890'):
        with pytest.raises(ValueError):
            loads(text)


@pytest.fixture
def kube(server: FakeApiServer, tmp_path: Path) -> KubeClient:
    return load_client(kubeconfig=server.write_kubeconfig(tmp_path / "kubeconfig"))


def _claim(parameters: dict[str, Any]) -> dict[str, Any]:
    # A driver's opaque config is a RawExtension: the API server keeps whatever JSON it got.
    opaque = {"driver": "gpu.example.com", "parameters": parameters}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "wide", "namespace": "default"},
        "spec": {"devices": {"requests": [], "config": [{"opaque": opaque}]}},
    }


def _parameters(claim: dict[str, Any]) -> Any:
    return claim["spec"]["devices"]["config"][0]["opaque"]["parameters"]


def test_a_list_and_a_watch_keep_wide_integers(server: FakeApiServer, kube: KubeClient) -> None:
    """A claim's opaque parameters past 64 bits arrive exact in a GET and in a watch event."""
    parameters = {"edges": EDGES, "memory": 2**70}
    server.apply(_claim(parameters))
    path = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
    listed = kube.get(path)
    assert [_parameters(item) for item in listed["items"]] == [parameters]
    assert all(type(value) is int for value in _parameters(listed["items"][0])["edges"])
    version = listed["metadata"]["resourceVersion"]
    changed = {"edges": EDGES, "memory": 2**71}
    query = {"watch": True, "resourceVersion": version, "timeoutSeconds": 5}
    with kube.watch(path, query, read_timeout=5) as stream:
        server.apply(_claim(changed))
        event = next(iter(stream))
    assert event["type"] == "MODIFIED"
    assert _parameters(event["object"]) == changed
