"""Pasted what-if input goes through the bounded parser and the API server's validation: a 400
naming the document, line or field, never a 500 or a long wait."""

from __future__ import annotations

import tracemalloc

import pytest
import yaml

from dralib.allocator import Allocator
from tests.claims.whatif.helpers import URL, claim_object, claim_yaml

# Python allocations while one input is refused; a parsed alias bomb or an unbounded nesting
# takes gigabytes.
MEMORY_BOUND = 64 * 1024 * 1024


def _all_with_count() -> str:
    claim = claim_object(claim_yaml())
    claim["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] = "All"
    return yaml.safe_dump(claim)


BILLION_LAUGHS = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(
            f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]"
            for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
        ),
    ]
)

CASES = [
    ("billion laughs", BILLION_LAUGHS, "document 1 line 1: YAML anchor &a is not supported"),
    ("deep nesting", "a: " + "[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
    ("duplicate key", "kind: Pod\nkind: Pod\n", "document 1 line 2: duplicate key 'kind'"),
    ("too large", "# " + "x" * (600 * 1024), "more than the limit of 512.0 KiB"),
    (
        "all with count",
        _all_with_count(),
        "must not be specified when allocationMode is 'All'",
    ),
    (
        "request name",
        claim_yaml().replace("name: gpu", "name: Bad_Name"),
        "RFC 1123 label",
    ),
    (
        "resourceClassName in v1alpha3",
        "apiVersion: resource.k8s.io/v1alpha3\nkind: ResourceClaimTemplate\n"
        "metadata: {name: t}\nspec:\n  spec: {resourceClassName: gpu}\n",
        "classic DRA",
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("label", "text", "detail"), CASES, ids=[c[0] for c in CASES])
def test_hostile_or_invalid_text_is_a_quick_400(
    demo, api, monkeypatch, label, text, detail
) -> None:
    """Each input is refused before any search, in bounded memory, saying where and why."""
    searches: list[object] = []
    allocate = Allocator.allocate
    monkeypatch.setattr(
        Allocator, "allocate", lambda self, *a, **k: searches.append(a) or allocate(self, *a, **k)
    )
    tracemalloc.start()
    try:
        response = api.post(URL, {"yaml": text}, format="json")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert searches == []
    assert peak < MEMORY_BOUND
    assert response.status_code == 400, response.content
    assert detail in response.json()["detail"]


@pytest.mark.django_db
def test_raw_body_that_is_not_utf8_is_refused(demo, api) -> None:
    """A raw YAML body with invalid UTF-8 is a 400 naming the line, not replaced characters."""
    body = claim_yaml().encode() + b"# caf\xe9\n"
    response = api.generic("POST", URL, body, content_type="application/yaml")
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "yaml"
    assert "not UTF-8 text" in response.json()["detail"]


@pytest.mark.django_db
def test_field_of_a_validation_error_names_document_and_path(demo, api) -> None:
    """A refused field is reported with its document and path, as the user wrote it."""
    response = api.post(URL, {"yaml": _all_with_count()}, format="json")
    assert response.json()["field"] == "yaml: document 1: spec.devices.requests[0].exactly.count"


@pytest.mark.django_db
@pytest.mark.parametrize("url", [URL, URL + "jobs/"], ids=["answer", "job"])
def test_deeply_nested_json_body_is_a_400(demo, api, url) -> None:
    """A JSON body nested past the bound is refused naming `body`, on both endpoints."""
    body = '{"yaml": ' + "[" * 50_000 + "]" * 50_000 + "}"
    response = api.generic("POST", url, body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json() == {"field": "body", "detail": "nested deeper than 64 levels"}


@pytest.mark.django_db
def test_nested_query_option_is_a_400(demo, api) -> None:
    """A JSON option in the query string is parsed with the same bounds."""
    assume = "[" * 2000 + "]" * 2000
    response = api.generic(
        "POST", URL + f"?assume={assume}", claim_yaml(), content_type="application/yaml"
    )
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "assume"
    assert "nested deeper than 64 levels" in response.json()["detail"]
