"""The what-if page: reads pasted, uploaded or stored input, shows placements or reasons."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from claims.models import ResourceClaimTemplate
from claims.whatif.service import what_if
from console.views import WhatIfInputError, read_claim_input
from demo.catalog import GPU_DRIVER

CLAIM = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpus, namespace: team-a}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: %(cls)s, count: %(count)d}
"""


def claim(count: int) -> str:
    return CLAIM % {"cls": GPU_DRIVER, "count": count}


def test_pasted_text_goes_to_the_service_as_is() -> None:
    """Pasted YAML is handed over unparsed, labelled as pasted."""
    assert read_claim_input(text=claim(1)) == (claim(1), "pasted YAML")


def test_an_uploaded_file_wins_over_the_text_box() -> None:
    """An uploaded file is read instead of the text box."""
    upload = SimpleUploadedFile("claim.yaml", claim(2).encode())
    assert read_claim_input(text="ignored", upload=upload) == (claim(2), "file claim.yaml")


def test_a_stored_template_can_be_picked(demo) -> None:
    """Naming a stored template hands over that template object."""
    template = ResourceClaimTemplate.objects.first()
    source, label = read_claim_input(text="", template=f"{template.namespace}/{template.name}")
    assert source == template.obj
    assert label.endswith(f"{template.namespace}/{template.name}")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"text": ""}, "claim:"),
        ({"text": "", "template": "nowhere/none"}, "template:"),
        ({"text": "", "upload": SimpleUploadedFile("x.yaml", b"\xff\xfe")}, "file:"),
    ],
)
def test_unreadable_input_names_the_field(db, kwargs: dict, field: str) -> None:
    """Missing or unreadable input raises an error that starts with the field at fault."""
    with pytest.raises(WhatIfInputError) as error:
        read_claim_input(**kwargs)
    assert str(error.value).startswith(field)


def test_a_fitting_claim_lists_the_nodes_the_service_found(demo, viewer_client: Client) -> None:
    """The page lists the service's placements and highlights the first one's devices."""
    expected = what_if(claim(1), use_cache=False)
    assert expected["fits"]
    response = viewer_client.post(reverse("what-if"), {"yaml": claim(1), "count": "1"})
    result = response.context["result"]
    assert [p["node"] for p in result["placements"]] == [p["node"] for p in expected["placements"]][
        :50
    ]
    body = response.content.decode()
    assert 'id="what-if-fits"' in body
    first = expected["placements"][0]["devices"][0]
    chosen = [c for grid in result["grids"] for c in grid["grid"] if c["chosen"]]
    assert [c["device"].name for c in chosen] == [first["device"]]
    assert ' chosen" href=' in body


def test_a_claim_that_cannot_fit_shows_the_reasons(demo, viewer_client: Client) -> None:
    """A claim for more devices than any node has shows the service's reasons."""
    expected = what_if(claim(20), use_cache=False)
    assert expected["fits"] is False and expected["reasons"]
    response = viewer_client.post(reverse("what-if"), {"yaml": claim(20), "count": "1"})
    body = response.content.decode()
    assert 'id="what-if-nofit"' in body
    for line in expected["diagnosis"]["reasons"]:
        assert line in body


def test_bad_input_shows_the_service_error(demo, viewer_client: Client) -> None:
    """Input the service rejects is shown with the field it names, never a server error."""
    response = viewer_client.post(reverse("what-if"), {"yaml": "kind: [", "count": "1"})
    assert response.status_code == 200
    assert 'id="what-if-error"' in response.content.decode()
    response = viewer_client.post(reverse("what-if"), {"yaml": claim(1), "count": "-3"})
    assert "count" in response.context["error"]


@pytest.mark.django_db
def test_assumed_changes_from_the_form_change_the_answer(demo, viewer_client) -> None:
    """Removing every node in the assume box leaves nowhere to fit, and the page says what it
    assumed; a malformed box is an error naming it."""
    nodes = [n["metadata"]["name"] for n in demo["Node"]]
    assume = "\n".join(f"- {{op: remove-node, node: {name}}}" for name in nodes)
    response = viewer_client.post(
        reverse("what-if"), {"yaml": claim(1), "assume": assume, "namespace": "team-a"}
    )
    assert response.context["error"] == ""
    result = response.context["result"]
    assert result["fits"] is False
    assert len(result["assumed"]) == len(nodes)
    assert b'id="what-if-assumed"' in response.content
    bad = viewer_client.post(reverse("what-if"), {"yaml": claim(1), "assume": "just text"})
    assert "assume" in bad.context["error"]
