"""What the what-if result says: a headline that counts quota, "max" said as max, stranded units,
made-up nodes unlinked; and share links that keep the answer as computed, bounded and private."""

from __future__ import annotations

from datetime import timedelta

import orjson
import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

import console.views
from claims.models import ResourceQuota, SharedWhatIf
from claims.whatif.shared import (
    SHARED_ANSWER_MAX_BYTES,
    SHARED_PER_SUBMITTER,
    answer_namespaces,
    keep_answer,
)
from demo.catalog import GPU_DRIVER
from tests.console.test_what_if_form import claim

URL = "/what-if/"


def test_a_share_link_runs_nothing_and_shows_the_kept_answer(
    demo, viewer_client: Client, monkeypatch
) -> None:
    """Opening the link answers from the kept row: no what-if runs, asOf and state are shown."""
    posted = viewer_client.post(URL, {"yaml": claim(1), "count": "4", "namespace": "team-a"})
    kept = SharedWhatIf.objects.get()
    assert posted.context["share_url"] == reverse("what-if-shared", args=[kept.token])

    def refuse(*args, **kwargs):
        raise AssertionError("a what-if ran on GET")

    monkeypatch.setattr(console.views, "run_request", refuse)
    response = viewer_client.get(posted.context["share_url"])
    assert response.status_code == 200
    result = response.context["result"]
    assert result["headroom"] == posted.context["result"]["headroom"]
    assert result["grids"] == []
    as_of = posted.context["result"]["cluster"].get("asOf")
    html = response.content.decode()
    kept_block = html.split('id="what-if-kept"')[1].split("</div>")[0]
    if as_of:
        assert f"data as of {as_of}" in kept_block
    assert "Run again now" in kept_block and "csrfmiddlewaretoken" in kept_block


def test_the_kept_row_names_its_submitter_and_namespaces(demo, viewer_client: Client) -> None:
    """The row keeps who asked and which namespaces the question touched (for visibility)."""
    viewer_client.post(URL, {"yaml": claim(1), "namespace": "team-a"})
    kept = SharedWhatIf.objects.get()
    assert kept.submitter == "viewer"
    assert kept.namespaces == ["team-a"]
    assert kept.values["yaml"] == claim(1)
    assert kept.expires > timezone.now() + timedelta(days=6)


def test_released_claims_count_among_the_namespaces() -> None:
    """A release-claim assumption names its claim's namespace too."""
    values = {"namespace": "team-a", "assume": "- {op: release-claim, claim: team-b/old}"}
    answer = {"namespace": "team-a", "pods": [{"pod": "team-c/p", "claims": []}]}
    assert answer_namespaces(answer, values) == ["team-a", "team-b", "team-c"]


def test_tokens_are_long_random_and_unknown_ones_are_404(demo, viewer_client: Client) -> None:
    """A link's token is 43 URL-safe random characters; a wrong or expired one is a 404."""
    first = viewer_client.post(URL, {"yaml": claim(1)}).context["share_url"]
    second = viewer_client.post(URL, {"yaml": claim(1)}).context["share_url"]
    tokens = [link.rstrip("/").rsplit("/", 1)[1] for link in (first, second)]
    assert tokens[0] != tokens[1] and all(len(t) >= 43 for t in tokens)
    assert viewer_client.get(reverse("what-if-shared", args=["x" * 43])).status_code == 404
    SharedWhatIf.objects.filter(token=tokens[0]).update(expires=timezone.now())
    assert viewer_client.get(first).status_code == 404
    assert viewer_client.get(second).status_code == 200


def test_a_share_link_needs_a_signed_in_person(demo, viewer_client: Client, settings) -> None:
    """Even with public read, an anonymous visitor is sent to sign in, not shown the answer."""
    settings.PUBLIC_READ = True
    link = viewer_client.post(URL, {"yaml": claim(1)}).context["share_url"]
    response = Client().get(link)
    assert response.status_code == 302 and "login" in response["Location"]


def test_kept_answers_are_bounded_per_submitter_and_in_size(db) -> None:
    """A submitter keeps at most SHARED_PER_SUBMITTER answers, each cut to the byte bound."""
    big = {"fits": True, "nodes": [{"node": f"n{i}", "pad": "x" * 1000} for i in range(2000)]}
    assert len(orjson.dumps(big)) > SHARED_ANSWER_MAX_BYTES
    for _ in range(SHARED_PER_SUBMITTER + 3):
        kept = keep_answer(big, values={"yaml": "x"}, source="pasted YAML", submitter="alice")
    keep_answer({"fits": True}, values={}, source="", submitter="bob")
    assert SharedWhatIf.objects.filter(submitter="alice").count() == SHARED_PER_SUBMITTER
    assert SharedWhatIf.objects.filter(submitter="bob").count() == 1
    assert len(orjson.dumps(kept.answer)) <= SHARED_ANSWER_MAX_BYTES
    assert kept.answer["trimmed"]


def test_full_quota_makes_the_headline_say_not_admitted(demo, viewer_client: Client) -> None:
    """Devices that fit while quota admits no copy: the headline says so, in red, with why."""
    quota = ResourceQuota.objects.get(namespace="team-a")
    quota.hard = {key: quota.used.get(key, "0") for key in quota.hard}
    quota.save(update_fields=["hard"])
    response = viewer_client.post(URL, {"yaml": claim(1), "count": "100", "namespace": "team-a"})
    result = response.context["result"]
    assert result["fits"] and result["headroom"]["placed"] > 0
    assert result["quota"]["copiesAllowed"] == 0
    html = response.content.decode()
    headline = html.split('id="what-if-fits"')[1].split("</p>")[0]
    assert "Not admitted" in headline and "quota in team-a admits none" in headline
    assert html.split('id="what-if-fits"')[0].rsplit("<p", 1)[1].strip().startswith('class="bad"')


def test_max_is_said_as_max_and_stranded_units_reach_the_page(demo, viewer_client: Client) -> None:
    """count=max is not "of the 10,000 asked"; the answer's stranded summary is on the page."""
    response = viewer_client.post(URL, {"yaml": claim(3), "count": "max"})
    result = response.context["result"]
    html = response.content.decode()
    copies = html.split('id="what-if-copies"')[1].split("</p>")[0]
    assert "most that fit" in copies and "10,000 asked" not in copies
    stranded = result["summary"]["stranded"]
    assert stranded and stranded["total"] > 0, "3-GPU copies leave GPUs stranded on the demo"
    block = html.split('id="what-if-stranded"')[1].split("</div>")[0]
    assert f"{stranded['total']:,} free device" in block
    assert f"({stranded['units']:,} physical unit" in block


def test_nodes_an_assumption_adds_are_not_links(demo, viewer_client: Client) -> None:
    """A placement on a node that add-nodes made up names it without linking to a 404."""
    untainted = {n["metadata"]["name"] for n in demo["Node"] if not n["spec"].get("taints")}
    like = sorted(
        s["spec"]["nodeName"]
        for s in demo["ResourceSlice"]
        if s["spec"].get("nodeName") in untainted and s["spec"]["driver"] == GPU_DRIVER
    )[0]
    added = f"{like}-clone-1"
    response = viewer_client.post(
        URL,
        {
            "yaml": claim(1),
            "nodes": added,
            "assume": f"- {{op: add-nodes, like: {like}, count: 1}}",
        },
    )
    result = response.context["result"]
    assert [p["node"] for p in result["placements"]] == [added]
    html = response.content.decode()
    assert reverse("node-detail", args=[added]) not in html
    assert f'<span class="mono" title="a node the assumptions added">{added}</span>' in html


@pytest.mark.parametrize("persona", ["admin_user"])
def test_the_submitter_is_not_the_only_reader(demo, viewer_client: Client, persona, request):
    """Without namespace visibility every signed-in reader may open a link (DESIGN.md)."""
    link = viewer_client.post(URL, {"yaml": claim(1)}).context["share_url"]
    other = Client()
    user: User = request.getfixturevalue(persona)
    other.force_login(user)
    assert other.get(link).status_code == 200


def test_the_headline_says_which_nodes_were_counted(demo, viewer_client: Client) -> None:
    """With a node selector the headline's "of N nodes" says they are the selected ones."""
    node = demo["Node"][0]
    key, value = next(iter(node["metadata"]["labels"].items()))
    response = viewer_client.post(URL, {"yaml": claim(1), "nodeSelector": f"{key}={value}"})
    html = response.content.decode()
    scope = html.split('id="what-if-scope"')[1].split("</p>")[0]
    assert f"<code>{key}={value}</code>" in scope
