"""Namespace visibility end to end: alice (group team-a) and bob (group team-b) walk every URL.

The fake API server answers the SubjectAccessReviews from RBAC objects over real HTTP; every
page, API list and detail, YAML and download, search, the live socket and /metrics are asked
as each person, and nothing of the other team (namespace, names, uids) may appear.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group, User
from django.db import connections
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.authtoken.models import Token

from claims.models import (
    AllocatedDevice,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
    SharedWhatIf,
)
from console.metrics import render_metrics
from dashboard.live import send_now
from dralib.kube.fakeapi import FakeApiServer
from inventory import visibility
from inventory.choices import Kind
from inventory.models import Device, Pool
from tests.console.test_live import connect, session_headers
from tests.factories import (
    allocation_result,
    claim_object,
    create,
    device_class_object,
    gpu_slice,
    node_object,
    pod_object,
    quota_object,
    scheduling_context_object,
    store,
    template_object,
)

DRIVER = "gpu.example.com"
TEAMS = {"team-a": "anvil", "team-b": "bravo"}
READER = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "namespace-reader"},
    "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaims", "resourceclaimtemplates"],
            "verbs": ["get", "list", "watch"],
        },
    ],
}


WHAT_IF = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: ask, namespace: {namespace}}}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {{deviceClassName: gpu.example.com, count: 3}}
"""


POD = """apiVersion: v1
kind: Pod
metadata: {{name: p, namespace: team-b}}
spec:
  containers: [{{name: c, image: x, resources: {{claims: [{{name: gpu}}]}}}}]
  resourceClaims: [{{name: gpu, resourceClaimTemplateName: {template}}}]
"""


def team_binding(team: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": f"{team}-read", "namespace": team},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": READER["metadata"]["name"],
        },
        "subjects": [{"kind": "Group", "name": team, "apiGroup": "rbac.authorization.k8s.io"}],
    }


@pytest.fixture
def cluster(settings: Any, tmp_path: Path) -> Iterator[FakeApiServer]:
    """A fake API server with one RoleBinding per team, and the dashboard pointed at it."""
    with FakeApiServer() as server:
        server.load_rbac([READER, team_binding("team-a"), team_binding("team-b")])
        settings.KUBECONFIG = str(server.write_kubeconfig(tmp_path / "kubeconfig.yaml"))
        settings.RBAC_VISIBILITY = True
        visibility.cache.clear()
        yield server
        visibility.cache.clear()


def person(name: str, team: str) -> User:
    user = User.objects.create_user(name, password=f"{name}-password-long")
    user.groups.add(Group.objects.get_or_create(name=team)[0])
    return user


@pytest.fixture
def teams(db: Any, cluster: FakeApiServer) -> dict[str, Any]:
    """Two nodes, one per team; each team's claim holds a device of its node, for its pod."""
    create(device_class_object(DRIVER, expression=f'device.driver == "{DRIVER}"'))
    store(
        Kind.NAMESPACE,
        *(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "uid": f"uid-{ns}"}}
            for ns in TEAMS
        ),
    )
    uids: dict[str, set[str]] = {team: {f"uid-{team}"} for team in TEAMS}
    for index, (team, word) in enumerate(TEAMS.items()):
        node = f"node-{index}"
        objects = [
            node_object(node),
            gpu_slice(node, node=node, count=2),
            claim_object(
                f"{word}-claim",
                namespace=team,
                device_class=DRIVER,
                results=[allocation_result("req", driver=DRIVER, pool=node, device="gpu-0")],
                node=node,
                reserved_for=[f"{word}-pod"],
            ),
            # Two GPUs on one node, where one is held: its diagnosis names the holders.
            claim_object(f"{word}-pending", namespace=team, device_class=DRIVER, count=2),
            pod_object(f"{word}-pod", namespace=team, claim=f"{word}-claim", node=node),
            template_object(f"{word}-template", namespace=team),
            quota_object(f"{word}-quota", namespace=team, hard={"pods": "10"}),
            scheduling_context_object(f"{word}-context", namespace=team, node=node),
        ]
        create(*objects)
        uids[team] |= {o["metadata"]["uid"] for o in objects if o["metadata"].get("namespace")}
    people = {"alice": person("alice", "team-a"), "bob": person("bob", "team-b")}
    for name, team in (("alice", "team-a"), ("bob", "team-b")):
        # A shared what-if answer of each team, for the share links' route.
        client = Client()
        client.force_login(people[name])
        asked = client.post("/what-if/", {"yaml": WHAT_IF.format(namespace=team), "count": "1"})
        assert b"what-if-share" in asked.content
    return {**people, "uids": uids}


def forbidden_for(team: str, uids: dict[str, set[str]]) -> list[str]:
    """What a member of `team` must never receive: the other team's namespace, names, uids."""
    other = next(t for t in TEAMS if t != team)
    return [other, TEAMS[other], *sorted(uids[other])]


def all_patterns(
    patterns: list[URLPattern | URLResolver], prefix: str = "", namespace: str = ""
) -> Iterator[tuple[str, str, URLPattern]]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            ns = ":".join(filter(None, [namespace, entry.namespace or ""]))
            yield from all_patterns(entry.url_patterns, prefix + str(entry.pattern), ns)
        else:
            name = ":".join(filter(None, [namespace, entry.name or ""]))
            yield name, prefix + str(entry.pattern), entry


def argument_sets(route: str) -> list[dict[str, str]]:
    """Values for a route's parameters: every stored object of each team that fits it."""
    params = set(re.findall(r"<(?:\w+:)?(\w+)>", route))
    if not params:
        return [{}]
    sets: list[dict[str, str]] = []
    if params == {"namespace", "name"}:
        for model in (ResourceClaim, Pod, ResourceClaimTemplate):
            sets += [
                {"namespace": ns, "name": n}
                for ns, n in model.objects.values_list("namespace", "name")
            ]
    elif params == {"pk"}:
        for model in (ResourceClaim, Pod, ResourceClaimTemplate, AllocatedDevice, Pool, Device):
            sets += [{"pk": str(pk)} for pk in model.objects.values_list("pk", flat=True)]
    elif params == {"driver", "pool"}:
        sets = [{"driver": d, "pool": p} for d, p in Pool.objects.values_list("driver", "name")]
    elif params == {"driver", "pool", "name"}:
        sets = [
            {"driver": d, "pool": p, "name": n}
            for d, p, n in Device.objects.values_list("driver", "pool_name", "name")
        ]
    elif params == {"name"}:
        sets = [{"name": n} for n in ("node-0", "node-1", DRIVER)]
    elif params == {"job_id"}:
        sets = [{"job_id": "x" * 32}]
    elif params == {"token"}:
        sets = [{"token": token} for token in SharedWhatIf.objects.values_list("token", flat=True)]
    return sets


def fill(route: str, values: dict[str, str]) -> str:
    path = re.sub(r"\(\?P<(\w+)>[^)]*\)", lambda m: values[m.group(1)], route)
    path = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: values[m.group(1)], path)
    return "/" + path.replace("^", "").replace("$", "").replace("\\.", ".")


def urls_to_walk() -> list[str]:
    """Every route of the URL conf with its parameters filled, plus YAML and download forms."""
    urls: list[str] = []
    for _, route, _pattern in all_patterns(get_resolver().url_patterns):
        if route.startswith(("admin/", "accounts/")) or "(?P<format>" in route:
            continue
        sets = argument_sets(route)
        # A new route with parameters this walk cannot fill fails here, until it learns them.
        assert sets, f"no values for the parameters of {route}"
        for values in sets:
            url = fill(route, values)
            urls.append(url)
            if url.startswith("/api/"):
                urls.append(url + "?format=yaml")
            elif values.get("namespace"):
                urls.append(url + "?download=yaml")
            if not url.startswith("/api/"):
                # The fragments live updates re-fetch go through the same views.
                urls += [f"{url}?fragment={name}" for name in ("table", "body", "result")]
    # Searches and filters that name the other team outright.
    for team, word in TEAMS.items():
        urls += [f"/search/?q={word}", f"/claims/?namespace={team}", f"/pods/?q={word}"]
        urls += [f"/api/claims/resource-claims/?namespace={team}", f"/leaks/?q={word}"]
    return list(dict.fromkeys(urls))


def body_of(response: Any) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode(errors="replace")
    return response.content.decode(errors="replace")


@pytest.mark.parametrize(("name", "team"), [("alice", "team-a"), ("bob", "team-b")])
def test_every_url_shows_nothing_of_the_other_team(
    teams: dict[str, Any], name: str, team: str
) -> None:
    """Each URL in the URL conf, filled with each team's objects, answers the person without a
    trace of the other team; their own objects' details answer 200, the other team's 404."""
    client = Client()
    client.force_login(teams[name])
    forbidden = forbidden_for(team, teams["uids"])
    urls = urls_to_walk()
    assert len(urls) > 60, urls
    leaks, statuses = [], {}
    for url in urls:
        response = client.get(url)
        statuses[url] = response.status_code
        # /readyz answers 503 here: no watcher runs in this test.
        assert response.status_code < 500 or url.startswith("/readyz"), url
        text = body_of(response)
        for value in parse_qs(urlsplit(url).query).get("q", []) + parse_qs(urlsplit(url).query).get(
            "namespace", []
        ):
            # What the person typed comes back in the form (and its links): it tells nothing.
            for echo in (f'value="{value}"', f"={value}", f'"{value}"', f"“{value}”"):
                text = text.replace(echo, "")
        if response.status_code == 404:
            # A 404 may echo the path asked for; the person typed it, it tells them nothing.
            for part in url.split("?")[0].split("/"):
                text = text.replace(part, "") if part else text
        found = [token for token in forbidden if token in text]
        if found:
            leaks.append((url, found))
    assert leaks == [], "\n".join(f"{url}: {found[:3]}" for url, found in leaks)
    own, other = TEAMS[team], next(w for t, w in TEAMS.items() if t != team)
    other_ns = next(t for t in TEAMS if t != team)
    assert statuses[f"/claims/{team}/{own}-claim/"] == 200
    assert statuses[f"/claims/{other_ns}/{other}-claim/"] == 404
    assert statuses[f"/pods/{other_ns}/{other}-pod/"] == 404
    assert statuses[f"/templates/{other_ns}/{other}-template/"] == 404
    other_claim = ResourceClaim.objects.get(name=f"{other}-claim")
    assert statuses[f"/api/claims/resource-claims/{other_claim.pk}/"] == 404
    mine = client.get("/api/claims/resource-claims/").json()["results"]
    assert sorted(c["name"] for c in mine) == [f"{own}-claim", f"{own}-pending"]


def test_both_see_the_same_availability(teams: dict[str, Any]) -> None:
    """Capacity is cluster-scoped: alice, bob and an admin read identical availability."""
    answers = []
    for user in (teams["alice"], teams["bob"], User.objects.create_superuser("root", password="x")):
        client = Client()
        client.force_login(user)
        response = client.get("/api/inventory/availability/")
        assert response.status_code == 200
        body = response.json()
        body.pop("cluster", None)
        answers.append(json.dumps(body, sort_keys=True))
    assert answers[0] == answers[1] == answers[2]
    assert '"free"' in answers[0]


def test_metrics_for_a_person_hold_only_their_namespaces(teams: dict[str, Any]) -> None:
    """A person's /metrics drops the other team's namespaced series; the full scrape has both."""
    full = render_metrics().decode()
    assert 'namespace="team-b"' in full and 'namespace="team-a"' in full
    for name, team in (("alice", "team-a"), ("bob", "team-b")):
        client = Client()
        client.force_login(teams[name])
        text = client.get("/metrics").content.decode()
        for token in forbidden_for(team, teams["uids"]):
            assert token not in text, (name, token)
        assert f'namespace="{team}"' in text
    token = Token.objects.create(user=teams["bob"])
    text = Client().get("/metrics", HTTP_AUTHORIZATION=f"Token {token.key}").content.decode()
    assert 'namespace="team-b"' in text and "team-a" not in text


@pytest.mark.django_db(transaction=True)
async def test_live_topics_of_the_other_namespace_are_refused(cluster: FakeApiServer) -> None:
    """Alice may follow namespace:team-a; namespace:team-b is refused (4403), as is a list."""

    def setup() -> list[tuple[bytes, bytes]]:
        store(
            Kind.NAMESPACE,
            *(
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": ns, "uid": f"uid-{ns}"},
                }
                for ns in TEAMS
            ),
        )
        return session_headers(person("alice", "team-a"))

    headers = await sync_to_async(setup)()
    try:
        own, connected = await connect("/ws/live/?topics=namespace:team-a", headers)
        assert connected
        await own.disconnect()
        other, connected = await connect("/ws/live/?topics=namespace:team-b", headers)
        assert not connected
        mixed, connected = await connect("/ws/live/?topics=claims,namespace:team-b", headers)
        assert not connected
    finally:
        await sync_to_async(connections.close_all)()


def test_what_if_answers_and_jobs_stay_in_their_namespaces(teams: dict[str, Any]) -> None:
    """Alice's what-if (which needs GPUs bob's claim holds) names no bravo object; asking in
    team-b is refused naming the namespace; her job is 404 to bob and answers her."""
    alice, bob = Client(), Client()
    alice.force_login(teams["alice"])
    bob.force_login(teams["bob"])
    forbidden = forbidden_for("team-a", teams["uids"])
    mine = alice.post(
        "/api/claims/what-if/",
        {"yaml": WHAT_IF.format(namespace="team-a")},
        content_type="application/json",
    )
    assert mine.status_code == 200, mine.content
    assert not [token for token in forbidden if token in mine.content.decode()]
    refused = alice.post(
        "/api/claims/what-if/",
        {"yaml": WHAT_IF.format(namespace="team-b")},
        content_type="application/json",
    )
    assert refused.status_code == 400
    assert refused.json()["field"] == "namespace"
    # A pod naming a template of team-b is refused alike whether the template exists or not.
    answers = []
    for template in ("bravo-template", "no-such-template"):
        pod = POD.format(template=template)
        answer = alice.post("/api/claims/what-if/", {"yaml": pod}, content_type="application/json")
        answers.append((answer.status_code, answer.json()))
    assert answers[0] == answers[1] and answers[0][0] == 400
    unnamed = alice.post(
        "/api/claims/what-if/",
        {"yaml": WHAT_IF.format(namespace="team-a").replace(", namespace: team-a", "")},
        content_type="application/json",
    )
    assert unnamed.json()["detail"] == (
        "namespace 'default' is not one you may list pods and claims in (yours: team-a)"
    )
    page = alice.post("/what-if/", {"yaml": WHAT_IF.format(namespace="team-a"), "count": "1"})
    assert page.status_code == 200
    assert not [token for token in forbidden if token in page.content.decode()]
    # One GPU on bob's node fits: its pool grid shows bob's claim on gpu-0 by place only.
    one = WHAT_IF.format(namespace="team-a").replace("count: 3", "count: 1")
    page = alice.post("/what-if/", {"yaml": one, "count": "1", "nodes": "node-1"})
    text = page.content.decode()
    assert 'data-device="gpu-0"' in text and visibility.OTHER_CLAIM in text
    assert not [token for token in forbidden if token in text]
    job = alice.post(
        "/api/claims/what-if/jobs/",
        {"yaml": WHAT_IF.format(namespace="team-a")},
        content_type="application/json",
    )
    assert job.status_code == 202, job.content
    url = f"/api/claims/what-if/jobs/{job.json()['id']}/"
    assert bob.get(url).status_code == 404
    read = alice.get(url)
    assert read.status_code == 200
    assert not [token for token in forbidden if token in read.content.decode()]


def test_a_diagnosis_says_the_other_teams_holder_without_naming_it(teams: dict[str, Any]) -> None:
    """Bob's pending claim (made on open) is blocked on node-0 by alice's claim: page and API
    say "a claim in another namespace", though the stored diagnosis names it."""
    client = Client()
    client.force_login(teams["bob"])
    page = client.get("/claims/team-b/bravo-pending/").content.decode()
    claim = ResourceClaim.objects.get(namespace="team-b", name="bravo-pending")
    assert "anvil-claim" in json.dumps(claim.diagnosis)  # stored as computed: views hide it
    assert "anvil" not in page and visibility.OTHER_CLAIM in page
    detail = client.get(f"/api/claims/resource-claims/{claim.pk}/").content.decode()
    assert "anvil" not in detail and visibility.OTHER_CLAIM in detail


def test_a_shared_answer_opens_for_its_team_only(teams: dict[str, Any]) -> None:
    """Alice's kept what-if answer (team-a) is 404 to bob and opens for alice."""
    token = SharedWhatIf.objects.get(submitter="alice").token
    alice, bob = Client(), Client()
    alice.force_login(teams["alice"])
    bob.force_login(teams["bob"])
    assert bob.get(f"/what-if/shared/{token}/").status_code == 404
    assert alice.get(f"/what-if/shared/{token}/").status_code == 200


def test_shared_live_renders_are_kept_apart_by_visibility(teams: dict[str, Any]) -> None:
    """The same live refresh URL (one event) renders once per visibility: bob does not get the
    table alice's request rendered."""
    url = "/claims/?fragment=table&live=0123abcd"
    alice, bob = Client(), Client()
    alice.force_login(teams["alice"])
    bob.force_login(teams["bob"])
    mine = alice.get(url).content.decode()
    theirs = bob.get(url).content.decode()
    assert "anvil-claim" in mine and "bravo" not in mine
    assert "bravo-claim" in theirs and "anvil" not in theirs


@pytest.mark.django_db(transaction=True)
async def test_generic_topics_carry_only_visible_ids(cluster: FakeApiServer) -> None:
    """Following `claims`, alice hears of her team's claim and not of bob's."""

    def setup() -> tuple[list[tuple[bytes, bytes]], int, int]:
        store(
            Kind.NAMESPACE,
            *(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "uid": n}}
                for n in TEAMS
            ),
        )
        create(
            claim_object("anvil-one", namespace="team-a"),
            claim_object("bravo-one", namespace="team-b"),
        )
        ids = dict(ResourceClaim.objects.values_list("name", "pk"))
        return session_headers(person("alice", "team-a")), ids["anvil-one"], ids["bravo-one"]

    headers, mine, theirs = await sync_to_async(setup)()
    try:
        socket, connected = await connect("/ws/live/?topics=claims", headers)
        assert connected
        await sync_to_async(send_now)({"claims": [str(theirs)]})
        assert await socket.receive_nothing(timeout=0.5)
        await sync_to_async(send_now)({"claims": [str(theirs), str(mine)]})
        message = await socket.receive_json_from(timeout=5)
        assert message["ids"] == [str(mine)]
        await socket.disconnect()
    finally:
        await sync_to_async(connections.close_all)()


@pytest.mark.django_db(transaction=True)
async def test_one_event_is_filtered_once_for_pages_of_one_visibility(
    cluster: FakeApiServer, monkeypatch
) -> None:
    """Three open pages of alice's hear of her claim from one event; its ids were filtered for
    her visibility once, not once per page."""
    from console import live

    def setup() -> tuple[list[tuple[bytes, bytes]], int]:
        store(
            Kind.NAMESPACE,
            *(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "uid": n}}
                for n in TEAMS
            ),
        )
        create(
            claim_object("anvil-one", namespace="team-a"),
            claim_object("bravo-one", namespace="team-b"),
        )
        ids = dict(ResourceClaim.objects.values_list("name", "pk"))
        return session_headers(person("alice", "team-a")), ids["anvil-one"]

    filtered: list[str] = []
    original = live.visible_ids

    def counting(group: str, ids: list[str], seen: Any) -> list[str]:
        filtered.append(group)
        return original(group, ids, seen)

    monkeypatch.setattr(live, "visible_ids", counting)
    headers, mine = await sync_to_async(setup)()
    try:
        sockets = []
        for _ in range(3):
            socket, connected = await connect("/ws/live/?topics=claims", headers)
            assert connected
            sockets.append(socket)
        await sync_to_async(send_now)({"claims": [str(mine)]})
        for socket in sockets:
            message = await socket.receive_json_from(timeout=5)
            assert message["ids"] == [str(mine)]
        assert filtered == ["claims"]
        for socket in sockets:
            await socket.disconnect()
    finally:
        await sync_to_async(connections.close_all)()


def test_overview_counts_and_token_api_are_scoped(teams: dict[str, Any]) -> None:
    """The overview counts alice's pending claims only (an admin counts both teams'); a DRF
    token of bob's lists bob's claims only."""
    alice, admin = Client(), Client()
    alice.force_login(teams["alice"])
    admin.force_login(User.objects.create_superuser("root", password="root-password-long"))
    pending = 'id="stat-pending">{}</div>'
    assert pending.format(1) in alice.get("/").content.decode()
    assert pending.format(2) in admin.get("/").content.decode()
    token = Token.objects.create(user=teams["bob"])
    listed = Client().get("/api/claims/resource-claims/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert sorted(c["name"] for c in listed.json()["results"]) == ["bravo-claim", "bravo-pending"]
