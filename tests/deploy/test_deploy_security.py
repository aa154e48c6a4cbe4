"""Deployment hardening in deploy/ and docker-compose.yml: Redis needs a password and is reachable
only by the dashboard's pods, the web pod holds no API token, compose publishes on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import yaml

from console import serve
from tests.deploy.test_compose import example_config, run_config
from tests.deploy.test_manifests import DEPLOY, ROOT, of_kind, one, pod_specs

LABEL_NAME = "app.kubernetes.io/name"
LABEL_COMPONENT = "app.kubernetes.io/component"


def pod_labels(workload: str) -> dict[str, str]:
    kinds = {"dra-dashboard-migrate": "Job"}
    doc = one(kinds.get(workload, "Deployment"), workload)
    return dict(doc["spec"]["template"]["metadata"]["labels"])


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Kubernetes label-selector semantics for matchLabels and In/NotIn/Exists expressions."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values", [])
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and labels.get(key) in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
    return True


def policies_for(labels: dict[str, str]) -> list[dict[str, Any]]:
    return [p for p in of_kind("NetworkPolicy") if selects(p["spec"]["podSelector"], labels)]


def allowed_peers(labels: dict[str, str], port: int | str) -> set[str | None]:
    """Workloads whose pods may connect to pods with `labels` on `port` (None: anyone)."""
    workloads = [name for name, _ in pod_specs()]
    peers: set[str | None] = set()
    for policy in policies_for(labels):
        for rule in policy["spec"].get("ingress", []):
            if rule.get("ports") and port not in {p["port"] for p in rule["ports"]}:
                continue
            if not rule.get("from"):
                peers.add(None)
                continue
            for peer in rule["from"]:
                assert set(peer) == {"podSelector"}, "only same-namespace pod peers are expected"
                peers |= {w for w in workloads if selects(peer["podSelector"], pod_labels(w))}
    return peers


def test_every_pod_is_behind_a_default_deny_policy() -> None:
    """A policy with an empty podSelector and no ingress rule denies what nothing else allows."""
    [deny] = [p for p in of_kind("NetworkPolicy") if p["spec"]["podSelector"] == {}]
    assert deny["spec"]["policyTypes"] == ["Ingress"]
    assert "ingress" not in deny["spec"]
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert "networkpolicy.yaml" in kustomization["resources"]


def test_only_dashboard_pods_reach_redis_and_postgres() -> None:
    """Redis admits web, worker and beat on 6379; an in-namespace PostgreSQL those and migrate."""
    redis_labels = pod_labels("dra-dashboard-redis")
    assert any(
        p["spec"]["podSelector"].get("matchLabels", {}).get(LABEL_COMPONENT) == "redis"
        for p in policies_for(redis_labels)
    )
    assert allowed_peers(redis_labels, 6379) == {
        "dra-dashboard-web",
        "dra-dashboard-worker",
        "dra-dashboard-beat",
    }
    assert allowed_peers(redis_labels, 6380) == set()
    postgres = {LABEL_NAME: "postgres", LABEL_COMPONENT: "postgres"}
    assert allowed_peers(postgres, 5432) == {
        "dra-dashboard-web",
        "dra-dashboard-worker",
        "dra-dashboard-beat",
        "dra-dashboard-migrate",
    }


def test_only_the_web_port_is_reachable_on_web_pods() -> None:
    """Anyone may reach the web pods' http port, nothing else; workers and beat take nothing."""
    web = pod_labels("dra-dashboard-web")
    assert allowed_peers(web, "http") == {None}
    assert allowed_peers(web, 8001) == set()
    for workload in ("dra-dashboard-worker", "dra-dashboard-beat", "dra-dashboard-migrate"):
        assert allowed_peers(pod_labels(workload), 8000) == set(), workload


def test_redis_requires_the_password_from_its_secret() -> None:
    """Redis reads `requirepass` from the Secret on stdin; the dashboard's URL carries it."""
    spec = dict(pod_specs())["dra-dashboard-redis"]
    [container] = spec["containers"]
    assert container["command"] == ["sh", "-c"]
    [script] = container["args"]
    subprocess.run(["sh", "-n", "-c", script], check=True)
    assert script.startswith("exec redis-server - ")
    assert "requirepass $REDISCLI_AUTH\n" in script
    [env] = [e for e in container["env"] if e["name"] == "REDISCLI_AUTH"]
    ref = env["valueFrom"]["secretKeyRef"]
    password = one("Secret", ref["name"])["stringData"][ref["key"]]
    url = one("Secret", "dra-dashboard")["stringData"]["DASHBOARD_REDIS_URL"]
    assert url == f"redis://:{password}@dra-dashboard-redis:6379/0"
    assert "DASHBOARD_REDIS_URL" not in one("ConfigMap", "dra-dashboard")["data"]


def test_service_account_tokens_only_where_the_api_is_watched() -> None:
    """Only the worker (the watchers) mounts a token; web, beat, migrate and Redis do not."""
    mounted = {name: spec.get("automountServiceAccountToken", True) for name, spec in pod_specs()}
    assert mounted == {
        "dra-dashboard-web": False,
        "dra-dashboard-worker": True,
        "dra-dashboard-beat": False,
        "dra-dashboard-migrate": False,
        "dra-dashboard-redis": False,
    }


def test_the_web_server_trusts_no_proxy_headers_itself() -> None:
    """The image's server takes no proxy headers itself; TRUSTED_PROXIES is set in the ConfigMap."""
    lines = (DEPLOY / "entrypoint.sh").read_text().splitlines()
    [web] = [line.strip() for line in lines if line.strip().startswith("exec python -m console")]
    assert web.startswith("exec python -m console.serve --host 0.0.0.0")
    assert "--proxy-headers" not in web
    assert not serve.config("console.asgi:application", host="0.0.0.0", port=8000).proxy_headers
    assert one("ConfigMap", "dra-dashboard")["data"]["DASHBOARD_TRUSTED_PROXIES"]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return example_config()


def test_compose_publishes_only_web_and_on_loopback(compose) -> None:
    """Only web publishes a port, bound to 127.0.0.1 unless DASHBOARD_HTTP_BIND says otherwise."""
    published = {name: s.get("ports", []) for name, s in compose["services"].items()}
    assert {name for name, ports in published.items() if ports} == {"web"}
    [port] = published["web"]
    assert port["host_ip"] == "127.0.0.1"
    assert port["target"] == 8000 and port["published"] == "8000"


def test_compose_bind_address_can_be_opened_on_purpose() -> None:
    """DASHBOARD_HTTP_BIND=0.0.0.0 is the explicit way to publish on every interface."""
    result = run_config(
        "--env-file",
        ".env.example",
        "-f",
        "docker-compose.yml",
        "config",
        "--format",
        "json",
        env={"DASHBOARD_ENV_FILE": ".env.example", "DASHBOARD_HTTP_BIND": "0.0.0.0"},
    )
    assert result.returncode == 0, result.stderr
    [port] = json.loads(result.stdout)["services"]["web"]["ports"]
    assert port["host_ip"] == "0.0.0.0"


def test_compose_redis_requires_the_password(compose) -> None:
    """Compose's Redis takes REDIS_PASSWORD on stdin and every dashboard URL carries it."""
    redis = compose["services"]["redis"]
    password = redis["environment"]["REDISCLI_AUTH"]
    assert password == "CHANGE-ME-redis-password"
    assert redis["command"][:2] == ["sh", "-c"]
    # `config` prints a compose file again, so the shell's $ is still escaped as $$.
    assert "requirepass $$REDISCLI_AUTH\n" in redis["command"][2]
    for name in ("migrate", "web", "worker", "beat"):
        url = compose["services"][name]["environment"]["DASHBOARD_REDIS_URL"]
        assert url == f"redis://:{password}@redis:6379/0", name


def test_compose_refuses_a_missing_redis_password() -> None:
    """Without REDIS_PASSWORD the compose file does not even parse."""
    env_file = (ROOT / ".env.example").read_text()
    assert "\nREDIS_PASSWORD=" in env_file
    result = run_config(
        "-f",
        "docker-compose.yml",
        "config",
        env={"DASHBOARD_ENV_FILE": ".env.example", "POSTGRES_PASSWORD": "x"},
    )
    assert result.returncode != 0
    assert "set REDIS_PASSWORD in .env" in result.stderr
