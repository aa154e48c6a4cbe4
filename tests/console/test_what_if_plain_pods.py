"""The what-if page answers pods that use no claim: where they go on cpu and memory, or why not."""

from __future__ import annotations

import yaml
from django.test import Client
from django.urls import reverse


def web(cpu: str, replicas: int = 2) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "team-a"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [{"name": "web", "resources": {"requests": {"cpu": cpu}}}]
                    },
                },
            },
        }
    )


def test_a_cpu_only_deployment_is_placed_on_the_page(demo, viewer_client: Client) -> None:
    """Two small replicas are placed and listed, each with its node; no device to show."""
    response = viewer_client.post(reverse("what-if"), {"yaml": web("1")})
    assert response.status_code == 200
    result = response.context["result"]
    assert [p["fits"] for p in result["pods"]] == [True, True]
    body = response.content.decode()
    assert 'id="what-if-pods"' in body and "team-a/web-1" in body


def test_a_pod_no_node_can_hold_says_why(demo, viewer_client: Client) -> None:
    """A 500-cpu replica fits nowhere: the scheduler's summary names NodeResourcesFit's reason."""
    response = viewer_client.post(reverse("what-if"), {"yaml": web("500", replicas=1)})
    assert response.status_code == 200
    result = response.context["result"]
    assert result["fits"] is False
    assert "Insufficient cpu" in result["reasons"][0]
    assert "Insufficient cpu" in response.content.decode()
