"""The what-if page reads pasted, uploaded or stored claims and reports bad input clearly."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from claims.models import ResourceClaimTemplate
from dashboard.views import WhatIfInputError, read_claim_input

CLAIM = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one-gpu}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com}
"""


def test_a_pasted_claim_gives_its_spec() -> None:
    """A pasted ResourceClaim yields its spec and names where it came from."""
    spec, source = read_claim_input(text=CLAIM)
    assert spec["devices"]["requests"][0]["name"] == "gpu"
    assert source == "ResourceClaim one-gpu"


def test_an_uploaded_file_wins_over_the_text_box() -> None:
    """An uploaded file is read instead of the text box."""
    upload = SimpleUploadedFile("claim.yaml", CLAIM.encode())
    spec, _ = read_claim_input(text="", upload=upload)
    assert spec["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu.example.com"


def test_a_stored_template_can_be_picked(demo) -> None:
    """Naming a stored template uses that template's claim spec."""
    template = ResourceClaimTemplate.objects.first()
    spec, source = read_claim_input(text="", template=f"{template.namespace}/{template.name}")
    assert spec == template.obj["spec"]["spec"]
    assert template.name in source


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("", "claim:"),
        ("a: [", "claim: not valid YAML"),
        ("- just a list", "claim: expected a mapping"),
        ("kind: Pod", "claim: kind 'Pod'"),
        ("kind: ResourceClaim\nmetadata: {name: x}\nspec: {}", "ResourceClaim x: spec.devices"),
    ],
)
def test_bad_input_names_the_field(text: str, field: str) -> None:
    """Each kind of bad input raises an error that starts with the field at fault."""
    with pytest.raises(WhatIfInputError) as error:
        read_claim_input(text=text)
    assert str(error.value).startswith(field)


def test_the_form_shows_input_errors(demo, viewer_client: Client) -> None:
    """Posting bad YAML re-renders the form with the error, never a server error."""
    response = viewer_client.post(reverse("what-if"), {"yaml": "kind: Pod", "count": "1"})
    assert response.status_code == 200
    assert "kind &#x27;Pod&#x27;" in response.content.decode()
    response = viewer_client.post(reverse("what-if"), {"yaml": CLAIM, "count": "0"})
    assert "count: between 1 and 100" in response.content.decode()
