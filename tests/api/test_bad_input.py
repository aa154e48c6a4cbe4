"""Wrong input to any endpoint is a 400 that names the parameter, never a 500."""

from __future__ import annotations

import base64

import pytest

from tests.api.endpoints import ALL_ENDPOINTS


def _cursor(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


BAD_COMMON = [
    ({"ordering": "bogus"}, "ordering"),
    ({"ordering": "name,-nope"}, "ordering"),
    ({"ordering": ""}, "ordering"),
    ({"ordering": "raw"}, "ordering"),
    ({"ordering": "--name"}, "ordering"),
    ({"ordering": "-%s"}, "ordering"),
    ({"limit": "ten"}, "limit"),
    ({"limit": "0"}, "limit"),
    ({"limit": "-5"}, "limit"),
    ({"cursor": "%%%not-base64"}, "cursor"),
    ({"cursor": _cursor("o=abc")}, "cursor"),
    ({"cursor": _cursor("r=maybe")}, "cursor"),
]


@pytest.mark.parametrize("endpoint", ALL_ENDPOINTS, ids=[e.url for e in ALL_ENDPOINTS])
@pytest.mark.parametrize(("params", "field"), BAD_COMMON, ids=[str(p) for p, _ in BAD_COMMON])
def test_bad_paging_and_ordering(api, endpoint, params, field) -> None:
    """Bad ordering fields, limits and cursors are refused with a message naming them."""
    response = api.get(endpoint.url, params)
    assert response.status_code == 400, response.content
    assert field in response.json()


@pytest.mark.parametrize(
    ("url", "params", "field"),
    [
        ("/api/inventory/devices/", {"state": "broken"}, "state"),
        ("/api/inventory/devices/", {"current": "maybe"}, "current"),
        ("/api/inventory/devices/", {"current": "100%s"}, "current"),
        ("/api/inventory/devices/", {"attribute": "a%s=b"}, "attribute"),
        ("/api/inventory/devices/", {"attribute": "%"}, "attribute"),
        ("/api/inventory/devices/", {"class": "%(x)s"}, "class"),
        ("/api/claims/resource-claims/", {"class": "'"}, "class"),
        ("/api/claims/resource-claim-templates/", {"class": "100%"}, "class"),
        ("/api/inventory/devices/", {"tainted": "2"}, "tainted"),
        ("/api/inventory/devices/", {"attribute": "model"}, "attribute"),
        ("/api/inventory/devices/", {"attribute": "=h100"}, "attribute"),
        ("/api/inventory/devices/", {"attribute": "Bad_Domain!/model=x"}, "attribute"),
        ("/api/inventory/devices/", {"attribute": "gpu.example.com/9lives=x"}, "attribute"),
        ("/api/inventory/devices/", {"attribute": ["model=h100", "nonsense"]}, "attribute"),
        ("/api/inventory/devices/", {"class": "missing-class"}, "class"),
        ("/api/inventory/nodes/", {"ready": "perhaps"}, "ready"),
        ("/api/inventory/pools/", {"complete": "yes please"}, "complete"),
        ("/api/inventory/resource-slices/", {"current": "x"}, "current"),
        ("/api/inventory/sync-status/", {"kind": "Gadget"}, "kind"),
        ("/api/inventory/skipped-objects/", {"kind": "Gadget"}, "kind"),
        ("/api/inventory/utilisation/pools/", {"complete": "x"}, "complete"),
        ("/api/inventory/utilisation/pools/", {"ordering": "bogus"}, "ordering"),
        ("/api/inventory/utilisation/pools/", {"limit": "x"}, "limit"),
        ("/api/claims/resource-claims/", {"state": "sleeping"}, "state"),
        ("/api/claims/resource-claims/", {"classic": "x"}, "classic"),
        ("/api/claims/resource-claims/", {"class": "Not A Class"}, "class"),
        ("/api/claims/resource-claims/", {"class": 'x"%'}, "class"),
        ("/api/claims/resource-claim-templates/", {"class": "UPPER"}, "class"),
        ("/api/claims/pods/", {"phase": "Dancing"}, "phase"),
        ("/api/claims/allocated-devices/", {"admin_access": "x"}, "admin_access"),
    ],
)
def test_bad_filter_values(api, cluster, url, params, field) -> None:
    """A filter value of the wrong type or an unknown choice is a 400 naming the filter."""
    response = api.get(url, params)
    assert response.status_code == 400, response.content
    body = response.json()
    assert field in body or field in str(body.get("detail")), body


def test_cursor_position_of_the_wrong_type(api, cluster) -> None:
    """A forged cursor whose position does not fit the ordering field is a 400."""
    response = api.get("/api/inventory/devices/", {"cursor": _cursor("p=not-a-number")})
    assert response.status_code == 400
    assert "cursor" in response.json()


@pytest.mark.parametrize(
    "url",
    [
        "/api/inventory/devices/999999/",
        "/api/inventory/pools/999999/utilisation/",
        "/api/claims/resource-claims/999999/",
        "/api/inventory/devices/not-a-number/",
    ],
)
def test_unknown_ids_are_404(api, cluster, url) -> None:
    """A missing object is a 404, not a server error."""
    assert api.get(url).status_code == 404


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_writes_are_refused(api, admin_user, cluster, method) -> None:
    """Synced objects are read-only: every write method is refused, even for an admin."""
    api.force_authenticate(admin_user)
    response = getattr(api, method)("/api/inventory/devices/1/", {})
    assert response.status_code in (403, 405)
