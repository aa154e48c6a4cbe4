"""The pool page shows the pool's ResourcePoolStatusRequest entry, equal to the API's."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from inventory.models import Pool


@pytest.mark.django_db
def test_pool_page_shows_the_same_status_as_the_api(demo, viewer_client: Client) -> None:
    """Every number of the API's entry for the pool appears in the page's pool-status card."""
    pool = Pool.objects.filter(complete=True).order_by("pk").first()
    assert pool is not None
    api = viewer_client.get(
        "/api/inventory/pool-status/", {"driver": pool.driver, "pool": pool.name}
    ).json()
    (entry,) = api["status"]["pools"]
    page = viewer_client.get(reverse("pool-detail", args=[pool.driver, pool.name]))
    card = page.content.decode().split('id="pool-status"')[1].split("</table>")[0]
    cells = [
        entry["totalDevices"],
        entry["allocatedDevices"],
        entry["availableDevices"],
        entry["unavailableDevices"],
        entry["resourceSliceCount"],
    ]
    assert "".join(f'<td class="num">{n}</td>' for n in cells) in card
