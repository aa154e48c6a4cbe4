"""The browsable API renders lists with their filter forms."""

from __future__ import annotations

import pytest

from tests.api.endpoints import ENDPOINTS


@pytest.mark.parametrize("url", [e.url for e in ENDPOINTS] + ["/api/inventory/", "/api/claims/"])
def test_browsable_api_renders(api, cluster, url: str) -> None:
    """Each list and each API root renders as HTML for a browser."""
    response = api.get(url, {"format": "api"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
