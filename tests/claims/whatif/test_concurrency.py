"""Concurrent what-ifs in one process: each answer equals the serial one, no CEL runtime error.

The bug this guards against: a CEL activation built in one request's thread was reused by another
thread, and any selector calling a library function (quantity, semver) then failed with "CEL
runtime error: INTERNAL: No PyCelArena found" on every node. Every round starts with cold
process-wide caches (cluster state, simulations, selector results, answers), so the threads
build and share them while they race, and a churning thread keeps replacing the kept cluster
state so the shared SliceCache drops and re-parses slices while the what-ifs use it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connections
from django.test import Client

from claims.whatif.service import forget_simulations, what_if
from claims.whatif.state import forget_cluster_state, forget_selector_caches
from dashboard import scope
from tests.asgi import asgi_request
from tests.claims.whatif.helpers import URL, claim_yaml

THREADS = 8
ROUNDS = 3
GPU = "gpu.example.com"

DEPLOYMENT = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {namespace: inference, name: one-big-gpu}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.example.com
          selectors:
          - cel:
              expression: device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("20Gi"))
---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: inference, name: server}
spec:
  replicas: 3
  selector: {matchLabels: {app: server}}
  template:
    metadata: {labels: {app: server}}
    spec:
      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-big-gpu}]
      containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]
"""

# (name, what_if keyword arguments): different classes, selectors and shapes of question.
QUESTIONS: list[tuple[str, dict[str, Any]]] = [
    ("plain", {"source": claim_yaml(name="plain", count=1)}),
    (
        "quantity",
        {
            "source": claim_yaml(
                name="quantity",
                count=1,
                selector=f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0',
            )
        },
    ),
    (
        "semver",
        {
            "source": claim_yaml(
                name="semver",
                count=1,
                selector=f'device.attributes["{GPU}"].driverVersion'
                '.isGreaterThan(semver("500.0.0"))',
            )
        },
    ),
    (
        "attribute",
        {
            "source": claim_yaml(
                name="attribute", count=2, selector=f'device.attributes["{GPU}"].model == "h100"'
            )
        },
    ),
    ("mig-class", {"source": claim_yaml(name="mig", count=1, device_class="mig-1g.10gb")}),
    (
        "headroom",
        {
            "source": claim_yaml(
                name="headroom",
                count=1,
                selector=f'device.capacity["{GPU}"].memory.isLessThan(quantity("100Gi"))',
            ),
            "count": 6,
        },
    ),
    ("deployment", {"source": DEPLOYMENT}),
    (
        "assumed",
        {
            "source": claim_yaml(
                name="assumed",
                count=1,
                selector=f'device.attributes["{GPU}"].driverVersion == semver("550.54.15")',
            ),
            "assume": [{"op": "add-nodes", "like": "node-0001", "count": 2}],
        },
    ),
]


def _comparable(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer without what differs between two runs of the same question."""
    return {k: v for k, v in answer.items() if k not in {"elapsedSeconds", "cached"}}


def _forget_everything() -> None:
    forget_cluster_state()
    forget_simulations()
    forget_selector_caches()
    cache.clear()


def _cel_errors(answer: Any) -> list[str]:
    text = json.dumps(answer)
    return [part for part in text.split('"') if "CEL runtime error" in part]


def _serial_answers() -> dict[str, dict[str, Any]]:
    answers = {}
    for name, kwargs in QUESTIONS:
        _forget_everything()
        answers[name] = _comparable(what_if(use_cache=False, **kwargs))
    _forget_everything()
    return answers


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Threads switch far more often than usual, so races on shared caches show up."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(before)


@pytest.mark.django_db(transaction=True)
def test_concurrent_what_ifs_match_serial_answers(demo, fast_switching) -> None:
    """Eight threads asking different what-ifs at once get the serial answers, no CEL errors."""
    serial = _serial_answers()
    for name, answer in serial.items():
        assert not _cel_errors(answer), name
    # Selectors must really have been evaluated: the quantity question narrows the GPUs.
    assert serial["quantity"]["summary"]["nodesFit"] > 0
    jobs = [QUESTIONS[(i + shift) % len(QUESTIONS)] for shift in range(2) for i in range(THREADS)]

    def ask(job: tuple[str, dict[str, Any]], *, start: threading.Barrier) -> tuple[str, Any]:
        name, kwargs = job
        try:
            start.wait()
            return name, _comparable(what_if(use_cache=name == "plain", **kwargs))
        finally:
            connections.close_all()

    def churn(stop: threading.Event) -> None:
        # A new listing replacing the kept one: the shared SliceCache drops and re-parses
        # slices while the what-ifs parse slices and build pools from it.
        try:
            while not stop.wait(0.01):
                forget_cluster_state()
                forget_simulations()
        finally:
            connections.close_all()

    for _ in range(ROUNDS):
        _forget_everything()
        start = threading.Barrier(THREADS)
        stop = threading.Event()
        churner = threading.Thread(target=scope.carried(churn), args=(stop,))
        churner.start()
        try:
            with ThreadPoolExecutor(max_workers=THREADS) as pool:
                results = list(pool.map(scope.carried(partial(ask, start=start)), jobs))
        finally:
            stop.set()
            churner.join()
        for name, answer in results:
            assert not _cel_errors(answer), (name, _cel_errors(answer)[:3])
            assert answer == serial[name], name


def _asgi_post(app: Any, body: bytes, *, cookies: str, csrf: str) -> Any:
    """POST body to the what-if endpoint through the ASGI application; (status, parsed body)."""

    async def call() -> tuple[int, Any]:
        status, content = await asgi_request(
            app,
            "POST",
            URL,
            body=body,
            headers=[
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"cookie", cookies.encode()),
                (b"x-csrftoken", csrf.encode()),
            ],
        )
        return status, json.loads(content)

    return call()


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_through_the_asgi_app(demo, viewer_user) -> None:
    """Concurrent POSTs through console.asgi, each in its own thread, answer like serial ones."""
    from console.asgi import application

    client = Client()
    client.force_login(viewer_user)
    csrf = "a" * 32
    cookies = f"sessionid={client.cookies['sessionid'].value}; csrftoken={csrf}"
    # The API takes the options by their JSON names; these questions only use `yaml` + `count`.
    bodies = {
        name: json.dumps(
            {"yaml": kwargs["source"], **({"count": kwargs["count"]} if "count" in kwargs else {})}
        ).encode()
        for name, kwargs in QUESTIONS
        if set(kwargs) <= {"source", "count"}
    }

    async def serially() -> dict[str, Any]:
        answers = {}
        for name, body in bodies.items():
            _forget_everything()
            status, answer = await _asgi_post(application, body, cookies=cookies, csrf=csrf)
            assert status == 200, (name, answer)
            answers[name] = _comparable(answer)
        return answers

    async def together() -> list[tuple[str, int, Any]]:
        names = [*bodies, *bodies]
        replies = await asyncio.gather(
            *(_asgi_post(application, bodies[n], cookies=cookies, csrf=csrf) for n in names)
        )
        pairs = zip(names, replies, strict=True)
        return [(name, status, answer) for name, (status, answer) in pairs]

    serial = asyncio.run(serially())
    for name, answer in serial.items():
        assert not _cel_errors(answer), name
    for _ in range(ROUNDS):
        _forget_everything()
        for name, status, answer in asyncio.run(together()):
            assert status == 200, (name, answer)
            assert not _cel_errors(answer), (name, _cel_errors(answer)[:3])
            assert _comparable(answer) == serial[name], name
