"""What-if results with many copies, shared result links, and pending claims in words."""

from __future__ import annotations

from django.test import Client
from django.urls import reverse

from claims.choices import ClaimState
from claims.models import ResourceClaim, ResourceQuota
from claims.whatif.listing import cluster_fingerprint
from demo.catalog import GPU_DRIVER
from tests.console.test_what_if_form import claim

MANY = "10000"


def test_copies_show_devices_and_copies_per_node(demo, viewer_client: Client) -> None:
    """With count > 1 every placed node lists its devices and how many copies it took."""
    response = viewer_client.post(reverse("what-if"), {"yaml": claim(1), "count": MANY})
    result = response.context["result"]
    placed = result["headroom"]["placed"]
    assert 0 < placed < int(MANY)
    assert sum(p["copies"] for p in result["placements"]) == placed
    assert all(p["devices"] for p in result["placements"])
    content = response.content.decode()
    assert f"{placed} of {MANY} copies placed" not in content
    assert f"Room for <strong>{placed:,}</strong>" in content
    assert "10,000" in content


def test_quota_is_said_per_copy(demo, viewer_client: Client) -> None:
    """The quota line gives what one copy needs, not what 10,000 copies would."""
    quota = ResourceQuota.objects.filter(namespace="team-a").first()
    assert quota is not None, "the demo gives team-a a quota"
    response = viewer_client.post(reverse("what-if"), {"yaml": claim(1), "count": MANY})
    lines = response.context["result"]["quota"]["lines"]
    gpu_lines = [line for line in lines if line["resource"].startswith(GPU_DRIVER)]
    assert gpu_lines and all(line["per_copy"] == "1" for line in gpu_lines)
    quota_text = response.content.decode().split('id="what-if-quota"')[1].split("</div>")[0]
    assert "=10000" not in quota_text and "requested" not in quota_text


def test_a_share_link_shows_the_answer_as_computed(demo, viewer_client: Client) -> None:
    """The result's link shows the kept answer (its asOf and state), runs nothing on GET, and
    offers "Run again now", a POST of the same fields, which answers the same."""
    posted = viewer_client.post(
        reverse("what-if"), {"yaml": claim(2), "count": "3", "namespace": "team-a"}
    )
    link = posted.context["share_url"]
    assert link.startswith("/what-if/shared/") and "yaml" not in link
    again = viewer_client.get(link)
    assert again.status_code == 200
    assert again.context["values"]["yaml"] == claim(2)
    assert again.context["values"]["count"] == "3"
    assert again.context["result"]["headroom"] == posted.context["result"]["headroom"]
    assert again.context["result"]["cluster"] == posted.context["result"]["cluster"]
    html = again.content.decode()
    assert 'id="what-if-kept"' in html and 'id="what-if-rerun"' in html
    assert 'method="post"' in html.split('id="what-if-rerun"')[0].rsplit("<form", 1)[1]
    rerun = viewer_client.post(reverse("what-if"), again.context["values"])
    assert rerun.context["result"]["headroom"] == posted.context["result"]["headroom"]
    assert rerun.context["share_url"] != link


def test_a_fitting_pending_claim_is_explained_in_words(demo, viewer_client: Client) -> None:
    """A pending claim whose diagnosis fits says it waits for the scheduler and links its pod."""
    # Any claim with an owner pod, made pending: the demo's own pending claims vary with how the
    # real allocator places the rest.
    pending = ResourceClaim.objects.exclude(owner_pod="").order_by("namespace", "name").first()
    assert pending is not None
    pending.state = ClaimState.PENDING
    # The state is the cluster's (it moves the claims' version); the diagnosis is the what-if's.
    pending.save(update_fields=["state"])
    pending.diagnosis = {
        "fits": True,
        "nodesChecked": 10,
        "nodesFit": 4,
        "firstNode": "",
        "best": [],
        "reasons": [],
        "requests": [],
        "pods": [pending.owner_pod],
        # Made on the cluster as it is: the page shows it instead of diagnosing again.
        "fingerprint": cluster_fingerprint(),
    }
    pending.save(update_fields=["diagnosis"])
    response = viewer_client.get(reverse("claim-detail", args=[pending.namespace, pending.name]))
    content = response.content.decode()
    section = content.split('id="diagnosis"')[1]
    assert "&quot;fits&quot;" not in section and '"fingerprint"' not in section
    assert "waiting for the scheduler" in section
    pod_url = reverse("pod-detail", args=[pending.namespace, pending.owner_pod])
    assert f'href="{pod_url}"' in section
    assert viewer_client.get(pod_url).status_code == 200


def test_a_no_fit_diagnosis_uses_the_what_if_view(demo, viewer_client: Client) -> None:
    """A pending claim that does not fit shows the reasons and filter stages, not JSON."""
    pending = ResourceClaim.objects.filter(state=ClaimState.PENDING).first()
    pending.diagnosis = {
        "fits": False,
        "nodesChecked": 10,
        "reasons": ["request gpu: 2 wanted, 1 left after node access"],
        "requests": [
            {
                "request": "gpu",
                "wanted": 2,
                "stage": "node access",
                "stages": [{"stage": "class selectors", "remaining": 8}],
            }
        ],
        "pods": [],
        "fingerprint": cluster_fingerprint(),
    }
    pending.save(update_fields=["diagnosis"])
    response = viewer_client.get(reverse("claim-detail", args=[pending.namespace, pending.name]))
    section = response.content.decode().split('id="diagnosis"')[1]
    assert 'id="pending-nofit"' in section and "Filter stage" in section
    assert "2 wanted, 1 left after node access" in section
    assert "&quot;fits&quot;" not in section


def test_objects_are_shown_and_downloaded_as_yaml(demo, viewer_client: Client) -> None:
    """A claim page shows its raw object as YAML and offers it as a file."""
    row = ResourceClaim.objects.first()
    url = reverse("claim-detail", args=[row.namespace, row.name])
    content = viewer_client.get(url).content.decode()
    assert 'id="object-yaml"' in content and f"name: {row.name}" in content
    assert "<script>" not in content.split("<body")[1]
    download = viewer_client.get(url, {"download": "yaml"})
    assert download["Content-Type"].startswith("application/yaml")
    assert "attachment" in download["Content-Disposition"]
    assert f"uid: {row.uid}" in download.content.decode()
