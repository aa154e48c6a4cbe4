"""The Claims filter form and the claim-to-template link."""

from __future__ import annotations

from django.test import Client
from django.urls import reverse

from claims.models import Pod, ResourceClaim, ResourceClaimTemplate, ResourceQuota
from claims.templates import POD_CLAIM_NAME, template_of_entry
from inventory.sync import upsert_events


def test_empty_filter_boxes_mean_no_filter(demo, viewer_client: Client) -> None:
    """Submitting the form with every box left empty lists every claim, with no error."""
    response = viewer_client.get(
        reverse("claim-list"), {"namespace": "", "state": "", "node": "", "class": "", "q": ""}
    )
    assert response.status_code == 200
    assert response.context["errors"] == []
    assert response.context["page_obj"].paginator.count == ResourceClaim.objects.count()


def test_the_device_class_box_filters_by_class(demo, viewer_client: Client) -> None:
    """The form's Device class box sends `class`, which the FilterSet applies."""
    content = viewer_client.get(reverse("claim-list")).content.decode()
    assert 'name="class"' in content and 'name="device_class"' not in content
    claim = ResourceClaim.objects.exclude(device_classes=[]).first()
    assert claim is not None
    wanted = claim.device_classes[0]
    response = viewer_client.get(reverse("claim-list"), {"class": wanted})
    listed = list(response.context["page_obj"].object_list)
    assert listed and all(wanted in c.device_classes for c in listed)
    assert response.context["page_obj"].paginator.count < ResourceClaim.objects.count()


def test_quota_lines_link_to_claims_of_their_class(demo, viewer_client: Client) -> None:
    """A quota line's drill-down link filters claims by namespace and `class`."""
    quota = ResourceQuota.objects.first()
    assert quota is not None
    content = viewer_client.get(reverse("quota-list")).content.decode()
    assert "device_class=" not in content
    assert f"?namespace={quota.namespace}&amp;class=" in content


def template_made_claims() -> list[tuple[ResourceClaim, str]]:
    """Claims whose owning pod names a template for the annotated entry, with that template."""
    pods = {(p.namespace, p.name): p.resource_claims for p in Pod.objects.all()}
    found = []
    for claim in ResourceClaim.objects.exclude(owner_pod=""):
        entry = (claim.obj["metadata"].get("annotations") or {}).get(POD_CLAIM_NAME, "")
        name = template_of_entry(pods.get((claim.namespace, claim.owner_pod), []), entry)
        if name:
            found.append((claim, name))
    return found


def test_claims_are_linked_to_the_template_their_pod_names(demo, viewer_client: Client) -> None:
    """The claim page names the pod entry's template, and the template page counts its claims."""
    made = template_made_claims()
    assert made, "the demo makes claims from templates"
    claim, template = made[0]
    entry = claim.obj["metadata"]["annotations"][POD_CLAIM_NAME]
    assert entry != template, "the demo names pod entries and templates differently"
    detail = viewer_client.get(reverse("claim-detail", args=[claim.namespace, claim.name]))
    assert detail.context["template_name"] == template
    assert f">{template}</a>" in detail.content.decode()
    listed = viewer_client.get(reverse("template-list"), {"namespace": claim.namespace})
    counts = {(t.namespace, t.name): n for t, n in listed.context["rows"]}
    expected = sum(1 for c, t in made if (c.namespace, t) == (claim.namespace, template))
    assert counts[(claim.namespace, template)] == expected > 0
    page = viewer_client.get(reverse("template-detail", args=[claim.namespace, template]))
    assert page.context["page_obj"].paginator.count == expected
    filtered = viewer_client.get(
        reverse("claim-list"), {"namespace": claim.namespace, "template": template}
    )
    assert filtered.context["page_obj"].paginator.count == expected


def test_a_claim_stored_before_its_pod_is_linked_when_the_pod_arrives(demo) -> None:
    """Pods synced after their claims fill in the claims' template names."""
    made = template_made_claims()
    claim, template = made[0]
    pod = Pod.objects.get(namespace=claim.namespace, name=claim.owner_pod)
    raw = dict(pod.raw)
    pod.delete()
    ResourceClaim.objects.filter(pk=claim.pk).update(template_name="")
    upsert_events("Pod", [(raw, None)], publish=False)
    assert ResourceClaim.objects.get(pk=claim.pk).template_name == template
    assert ResourceClaimTemplate.objects.filter(namespace=claim.namespace, name=template).exists()


def test_an_updated_claim_keeps_its_template_without_a_second_write(demo) -> None:
    """A claim's status update leaves its template name in place: no UPDATE sets it again."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    claim, template = template_made_claims()[0]
    raw = dict(claim.raw)
    raw["metadata"] = dict(raw["metadata"], resourceVersion="99999999")
    raw["metadata"]["labels"] = {**(raw["metadata"].get("labels") or {}), "bench": "x"}
    with CaptureQueriesContext(connection) as queries:
        upsert_events("ResourceClaim", [(raw, None)], publish=False)
    stored = ResourceClaim.objects.get(pk=claim.pk)
    assert stored.labels.get("bench") == "x"
    assert stored.template_name == template
    assert not [q for q in queries if 'SET "template_name"' in q["sql"]]
