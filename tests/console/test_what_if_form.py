"""The what-if page: reads pasted, uploaded or stored input, shows placements or reasons."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from claims.models import ResourceClaimTemplate
from claims.whatif.inputs import INPUT_LIMITS, WhatIfError
from claims.whatif.service import what_if
from console.views import read_claim_input
from demo.catalog import GPU_DRIVER

API = "/api/claims/what-if/"

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


def test_nothing_given_is_no_input() -> None:
    """Without text, upload or template there is no input; the request path reports it."""
    assert read_claim_input(text="  \n") == (None, "")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"text": "", "template": "nowhere/none"}, "template"),
        ({"text": "", "upload": SimpleUploadedFile("x.yaml", b"\xff\xfe")}, "yaml"),
    ],
)
def test_unreadable_input_names_the_field(db, kwargs: dict, field: str) -> None:
    """An unknown template or an upload that is not UTF-8 is a WhatIfError naming the field."""
    with pytest.raises(WhatIfError) as error:
        read_claim_input(**kwargs)
    assert error.value.field == field


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
    # The grid marks the chosen device in its tile's class and says so to screen readers.
    assert ' chosen" role="group"' in body and "chosen by what-if" in body


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


BAD_INPUT = [
    ("negative count", {"count": "-3"}, {"count": -3}),
    ("bad selector", {"nodeSelector": "=x"}, {"nodeSelector": "=x"}),
    ("unknown node", {"nodes": "nowhere"}, {"nodes": ["nowhere"]}),
    ("assume not a list", {"assume": "just text"}, {"assume": "just text"}),
    ("unknown op", {"assume": "- {op: explode}"}, {"assume": [{"op": "explode"}]}),
    ("invalid YAML", {"yaml": "kind: ["}, {"yaml": "kind: ["}),
    ("no input", {"yaml": ""}, {"yaml": None}),
]


@pytest.mark.parametrize(("label", "form", "body"), BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_input_is_the_same_error_from_the_page_and_the_api(
    demo, viewer_client: Client, api, label: str, form: dict, body: dict
) -> None:
    """The page shows `field: detail` of the 400 the API returns for the same input."""
    page = viewer_client.post(reverse("what-if"), {"yaml": claim(1), "count": "1", **form})
    response = api.post(API, {"yaml": claim(1), **body}, format="json")
    assert response.status_code == 400, response.content
    error = response.json()
    assert page.context["error"] == f"{error['field']}: {error['detail']}"


def test_text_options_read_alike_from_the_form_and_the_query_string(
    demo, viewer_client: Client, api
) -> None:
    """An `assume` box and an `assume` query parameter are read by one parser: one message."""
    page = viewer_client.post(reverse("what-if"), {"yaml": claim(1), "assume": "[[[1"})
    response = api.generic("POST", API + "?assume=[[[1", claim(1), content_type="application/yaml")
    assert response.status_code == 400
    error = response.json()
    assert error["field"] == "assume"
    assert page.context["error"] == f"{error['field']}: {error['detail']}"


def test_an_oversized_upload_is_refused_like_an_oversized_body(
    demo, viewer_client: Client, api
) -> None:
    """One size limit: an upload and a raw YAML body past it get the same message."""
    big = (claim(1) + "#" * INPUT_LIMITS.max_bytes).encode()
    page = viewer_client.post(
        reverse("what-if"), {"yaml": "", "file": SimpleUploadedFile("big.yaml", big)}
    )
    response = api.generic("POST", API, big, content_type="application/yaml")
    assert response.status_code == 400
    error = response.json()
    assert error["field"] == "yaml" and "limit of 512.0 KiB" in error["detail"]
    assert page.context["error"] == f"{error['field']}: {error['detail']}"


def test_a_link_with_the_old_field_names_still_restricts_the_nodes(
    demo, viewer_client: Client
) -> None:
    """Result links made before the form took the API's names (`node`) keep their meaning."""
    node = demo["Node"][0]["metadata"]["name"]
    response = viewer_client.get(reverse("what-if"), {"yaml": claim(1), "node": node, "run": "1"})
    assert response.context["values"]["nodes"] == node
    assert response.context["result"] is None
    ran = viewer_client.post(reverse("what-if"), response.context["values"])
    assert ran.context["result"]["summary"]["nodesChecked"] == 1
    kept = viewer_client.get(ran.context["share_url"])
    assert kept.context["values"]["nodes"] == node
