"""The what-if page's "Consider preemption": the node and the pods the scheduler would evict."""

from __future__ import annotations

import yaml
from django.test import Client
from django.urls import reverse

from tests.claims.whatif.conftest import load_objects
from tests.claims.whatif.test_preemption import LARGE, LOW, asking, cluster, running


def test_the_page_says_which_pods_would_be_preempted(db, viewer_client: Client) -> None:
    """With the box ticked the page says "Fits if this pod is preempted" on the chosen node and
    lists the victim; without it, the page only says the pod does not fit."""
    cluster(2, [running("batch-1", "machine1", LARGE, LOW), running("big", "machine2", 5, 10000)])
    text = yaml.safe_dump(asking(LARGE))
    ticked = viewer_client.post(reverse("what-if"), {"yaml": text, "preemption": "true"})
    assert ticked.status_code == 200
    body = ticked.content.decode()
    section = body.split('id="what-if-preemption"')[1]
    assert "Fits if this pod is preempted" in section
    node_link = f'<a href="{reverse("node-detail", args=["machine1"])}">machine1</a>'
    assert f"on node {node_link}" in section
    assert "team/batch-1" in section and "team/big" not in section
    assert 'name="preemption" value="true" checked' in body
    plain = viewer_client.post(reverse("what-if"), {"yaml": text})
    assert 'id="what-if-preemption"' not in plain.content.decode()
    assert 'name="preemption" value="true" checked' not in plain.content.decode()


def test_a_pod_that_cannot_preempt_says_why(db, viewer_client: Client) -> None:
    """A class with preemptionPolicy Never: the page gives upstream's reason."""
    cluster(1, [running("batch-1", "machine1", LARGE, LOW)])
    load_objects(
        [
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "polite", "uid": "uid-polite"},
                "value": 1000,
                "preemptionPolicy": "Never",
            }
        ]
    )
    text = yaml.safe_dump(asking(LARGE, "polite"))
    response = viewer_client.post(reverse("what-if"), {"yaml": text, "preemption": "true"})
    section = response.content.decode().split('id="what-if-preemption"')[1]
    assert "not eligible due to preemptionPolicy=Never." in section
