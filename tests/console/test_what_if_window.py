"""The what-if page shows a window of nodes with Previous/Next, posting the same question."""

from __future__ import annotations

from django.test import Client
from django.urls import reverse

from tests.console.test_what_if_form import claim


def test_the_page_pages_through_the_nodes(demo, viewer_client: Client) -> None:
    """ "showing 1-4 of 10 nodes" with a Next button that asks the same question at offset 4;
    that page offers Previous (offset 0) and Next (offset 8); the last page no Next."""
    values = {"yaml": claim(1), "nodesLimit": "4"}
    first = viewer_client.post(reverse("what-if"), values)
    html = first.content.decode()
    assert "showing 1-4 of 10 nodes" in html
    pager = html.split('id="what-if-pager"')[1].split("</form>")[0]
    assert 'name="nodesOffset" value="4" id="what-if-next"' in pager
    assert 'id="what-if-previous"' not in pager
    assert 'name="nodesLimit" value="4"' in pager and 'name="yaml"' in pager
    shown = [p["node"] for p in first.context["result"]["placements"]]
    assert shown and all(name <= "node-0004" for name in shown)
    second = viewer_client.post(reverse("what-if"), {**values, "nodesOffset": "4"})
    html = second.content.decode()
    assert "showing 5-8 of 10 nodes" in html
    assert 'name="nodesOffset" value="0" id="what-if-previous"' in html
    assert 'name="nodesOffset" value="8" id="what-if-next"' in html
    assert {p["node"] for p in second.context["result"]["placements"]}.isdisjoint(shown)
    last = viewer_client.post(reverse("what-if"), {**values, "nodesOffset": "8"}).content.decode()
    assert "showing 9-10 of 10 nodes" in last and 'id="what-if-next"' not in last


def test_a_bad_window_is_said_on_the_page(demo, viewer_client: Client) -> None:
    """A bad limit names the field, as the API's 400 does."""
    response = viewer_client.post(reverse("what-if"), {"yaml": claim(1), "nodesLimit": "-3"})
    assert response.context["error"].startswith("nodesLimit")


def test_all_nodes_fit_one_page_without_a_pager(demo, viewer_client: Client) -> None:
    """The default window (100) holds the 10 demo nodes: no pager."""
    response = viewer_client.post(reverse("what-if"), {"yaml": claim(1)})
    assert response.context["result"]["nodes_page"] is None
    assert 'id="what-if-pager"' not in response.content.decode()


def test_all_nodes_on_one_page(demo, viewer_client: Client) -> None:
    """The form's "Nodes per page" takes all: every node's verdict, no pager."""
    page = viewer_client.get(reverse("what-if")).content.decode()
    assert 'name="nodesLimit"' in page
    response = viewer_client.post(reverse("what-if"), {"yaml": claim(1), "nodesLimit": "all"})
    result = response.context["result"]
    assert result["nodes_page"] is None and result["summary"]["nodesChecked"] == 10


def test_an_offset_past_the_last_node(demo, viewer_client: Client) -> None:
    """An offset typed past the nodes says so, with Previous and no Next."""
    response = viewer_client.post(
        reverse("what-if"), {"yaml": claim(1), "nodesLimit": "4", "nodesOffset": "40"}
    )
    html = response.content.decode()
    assert "no nodes past the 10 there are" in html
    assert 'name="nodesOffset" value="36" id="what-if-previous"' in html
    assert 'id="what-if-next"' not in html
