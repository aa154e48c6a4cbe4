"""The OpenAPI schema is served and valid; Swagger UI loads only local static files."""

from __future__ import annotations

import re

import yaml
from drf_spectacular.validation import validate_schema

PATHS = [
    "/api/inventory/pools/",
    "/api/inventory/pools/{id}/utilisation/",
    "/api/inventory/devices/",
    "/api/inventory/resource-slices/",
    "/api/inventory/device-classes/",
    "/api/inventory/nodes/",
    "/api/inventory/device-taint-rules/",
    "/api/inventory/resource-classes/",
    "/api/inventory/counter-sets/",
    "/api/inventory/sync-status/",
    "/api/inventory/skipped-objects/",
    "/api/inventory/utilisation/pools/",
    "/api/inventory/utilisation/classes/",
    "/api/claims/resource-claims/",
    "/api/claims/resource-claim-templates/",
    "/api/claims/pods/",
    "/api/claims/resource-quotas/",
    "/api/claims/pod-scheduling-contexts/",
    "/api/claims/allocated-devices/",
]


def test_schema_is_served_and_valid(api) -> None:
    """/api/schema/ returns an OpenAPI 3 document that passes the OpenAPI validator."""
    response = api.get("/api/schema/")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    validate_schema(schema)
    assert schema["openapi"].startswith("3.")
    assert set(PATHS) <= set(schema["paths"])


def test_schema_documents_device_filters(api) -> None:
    """The device list documents its filters, including repeatable `attribute` terms."""
    schema = yaml.safe_load(api.get("/api/schema/").content)
    parameters = {
        p["name"]: p for p in schema["paths"]["/api/inventory/devices/"]["get"]["parameters"]
    }
    assert {"driver", "pool", "node", "class", "state", "attribute", "ordering", "limit"} <= set(
        parameters
    )
    assert parameters["attribute"]["schema"]["type"] == "array"


def test_schema_generation_has_no_warnings(capsys) -> None:
    """Generating the schema emits no drf-spectacular warnings or errors."""
    from django.core.management import call_command

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null")
    assert "Warning" not in capsys.readouterr().err


def test_swagger_ui_uses_only_local_static_files(api) -> None:
    """/api/docs/ is served from the sidecar: every script, style and icon URL is local."""
    response = api.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    urls = re.findall(r'(?:src|href)="([^"]+)"', html)
    urls += re.findall(r"""["'](https?://[^"']+)["']""", html)
    assert any("swagger-ui" in url for url in urls)
    for url in urls:
        assert url.startswith("/static/") or url.startswith("/api/"), url
    assert "cdn" not in html.lower()
