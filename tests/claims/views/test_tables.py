"""Tables: sorting by ?ordering=, ages and page numbers."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from claims.models import ResourceClaim

SORTABLE = [
    ("claim-list", "name"),
    ("template-list", "age"),
    ("pool-list", "devices"),
    ("node-list", "name"),
    ("device-list", "state"),
    ("pod-list", "age"),
    ("device-class-list", "name"),
    ("taint-rule-list", "driver"),
]


@pytest.mark.parametrize(("name", "column"), SORTABLE)
def test_columns_sort_both_ways(demo, viewer_client: Client, name: str, column: str) -> None:
    """`?ordering=c` and `?ordering=-c` both answer 200 with no error."""
    for value in (column, f"-{column}"):
        response = viewer_client.get(reverse(name), {"ordering": value})
        assert response.status_code == 200, (name, value)
        assert response.context["errors"] == [], (name, value)


def test_claims_sort_by_name_descending(demo, viewer_client: Client) -> None:
    """Descending order puts the last name first."""
    response = viewer_client.get(reverse("claim-list"), {"ordering": "-name"})
    names = [c.name for c in response.context["page_obj"].object_list]
    assert names[0] == ResourceClaim.objects.order_by("-name", "pk").first().name
    assert names == sorted(names, reverse=True)


@pytest.mark.parametrize("name", [name for name, _ in SORTABLE])
def test_a_bad_ordering_is_a_form_error(demo, viewer_client: Client, name: str) -> None:
    """An unknown column is reported by the form, never a server error."""
    response = viewer_client.get(reverse(name), {"ordering": "obj__secret"})
    assert response.status_code == 200
    assert any(e.startswith("ordering:") for e in response.context["errors"])


def test_headers_link_to_their_sort_order(demo, viewer_client: Client) -> None:
    """A sortable header links to its ordering and says the current direction."""
    content = viewer_client.get(reverse("claim-list"), {"ordering": "name"}).content.decode()
    assert 'aria-sort="ascending"' in content and "ordering=-name" in content
    assert "ordering=age" in content


def test_pages_are_numbered_and_ages_shown(demo, viewer_client: Client) -> None:
    """A list longer than a page offers page numbers and shows each row's age with its zone."""
    response = viewer_client.get(reverse("device-list"))
    paginator = response.context["page_obj"].paginator
    assert paginator.num_pages >= 3
    content = response.content.decode()
    assert f'aria-label="Page {paginator.num_pages}"' in content
    claims = viewer_client.get(reverse("claim-list")).content.decode()
    assert '<time class="ago" datetime="' in claims and 'UTC"' in claims
