"""A shared what-if link cannot make a signed-in browser run a what-if: GET only fills the form
in, and running is a POST that Django's CSRF check guards."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

import console.views

CLAIM = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared, namespace: team-a}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com}
"""


@pytest.fixture
def runs(monkeypatch) -> list[object]:
    """Every what-if the page starts, recorded instead of answered."""
    started: list[object] = []

    def record(question, **kwargs):
        started.append(question)
        raise AssertionError("a what-if ran")

    monkeypatch.setattr(console.views, "run_request", record)
    return started


def test_a_cross_site_get_of_a_share_link_runs_nothing(viewer_user, runs) -> None:
    """A link (old ones carry run=1) opened by a signed-in browser shows the form filled in."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(viewer_user)
    link = {"yaml": CLAIM, "count": "5", "namespace": "team-a", "run": "1"}
    response = client.get(reverse("what-if"), link, HTTP_REFERER="https://evil.example/")
    assert response.status_code == 200
    assert runs == []
    assert response.context["result"] is None and response.context["shared"]
    assert response.context["values"]["yaml"] == CLAIM
    assert response.context["values"]["count"] == "5"


def test_running_takes_a_post_with_the_csrf_token(viewer_user, runs) -> None:
    """A POST without the page's CSRF token (another site's form) is refused before running."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(viewer_user)
    refused = client.post(reverse("what-if"), {"yaml": CLAIM})
    assert refused.status_code == 403
    assert runs == []
    page = client.get(reverse("what-if"))
    token = page.context["csrf_token"]
    with pytest.raises(AssertionError, match="a what-if ran"):
        client.post(reverse("what-if"), {"yaml": CLAIM, "csrfmiddlewaretoken": str(token)})
    assert len(runs) == 1
