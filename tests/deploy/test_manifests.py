"""Kubernetes manifests in deploy/: they parse, kustomize lists them all, RBAC is read-only."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
import yaml

from tests.paths import ROOT

DEPLOY = ROOT / "deploy"
READ_VERBS = {"get", "list", "watch"}
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection", "escalate", "bind"}


def documents() -> list[tuple[str, dict[str, Any]]]:
    """(file name, document) for every Kubernetes object in deploy/."""
    found = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for document in yaml.safe_load_all(path.read_text()):
            if document is not None:
                found.append((path.name, document))
    return found


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [doc for _, doc in documents() if doc["kind"] == kind]


def one(kind: str, name: str) -> dict[str, Any]:
    matches = [doc for doc in of_kind(kind) if doc["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} found"
    return matches[0]


def pod_specs() -> list[tuple[str, dict[str, Any]]]:
    workloads = of_kind("Deployment") + of_kind("Job")
    return [(w["metadata"]["name"], w["spec"]["template"]["spec"]) for w in workloads]


def test_every_manifest_parses_with_kind_and_name() -> None:
    """Each YAML document has apiVersion, kind and metadata.name."""
    docs = documents()
    assert len(docs) >= 13
    for filename, doc in docs:
        assert doc.get("apiVersion") and doc.get("kind"), filename
        assert doc["metadata"]["name"], filename


def test_kustomization_lists_every_manifest() -> None:
    """kustomization.yaml names every other YAML file in deploy/, and only those."""
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    files = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(kustomization["resources"]) == sorted(files)
    assert kustomization["namespace"] == "dra-dashboard"
    assert [image["name"] for image in kustomization["images"]] == ["dra-dashboard"]


# The one create: SubjectAccessReviews write nothing, the API server answers them (visibility).
REVIEW_RULE = {
    "apiGroups": ["authorization.k8s.io"],
    "resources": ["subjectaccessreviews"],
    "verbs": ["create"],
}


def test_cluster_role_is_read_only_without_wildcards() -> None:
    """The ClusterRole grants only get/list/watch, but create on subjectaccessreviews and
    nothing else of that group, and no wildcard anywhere."""
    roles = of_kind("ClusterRole") + of_kind("Role")
    assert [r["metadata"]["name"] for r in roles] == ["dra-dashboard-reader"]
    reviews = [r for r in roles[0]["rules"] if "authorization.k8s.io" in r["apiGroups"]]
    assert reviews == [REVIEW_RULE]
    for rule in roles[0]["rules"]:
        if rule is reviews[0]:
            continue
        assert set(rule["verbs"]) <= READ_VERBS
        assert not set(rule["verbs"]) & WRITE_VERBS
        for field in ("verbs", "resources", "apiGroups"):
            assert all("*" not in item for item in rule[field]), field
        assert "nonResourceURLs" not in rule
        # Names cannot narrow list or watch, and every synced kind is listed and watched.
        assert "resourceNames" not in rule


def test_cluster_role_covers_every_synced_kind() -> None:
    """resource.k8s.io kinds (v1 and classic v1alpha2), nodes, pods, resourcequotas,
    limitranges, namespaces, priorityclasses, poddisruptionbudgets and events.k8s.io events, each
    with get, list and watch."""
    rules = [r for r in one("ClusterRole", "dra-dashboard-reader")["rules"] if r != REVIEW_RULE]
    granted = {
        (group, resource)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    resource_kinds = {
        "resourceslices",
        "deviceclasses",
        "resourceclaims",
        "resourceclaimtemplates",
        "devicetaintrules",
        "resourceclasses",
        "podschedulingcontexts",
        "resourceclaimparameters",
        "resourceclassparameters",
    }
    want = {("resource.k8s.io", r) for r in resource_kinds}
    want |= {("", r) for r in ("nodes", "pods", "resourcequotas", "limitranges", "namespaces")}
    want |= {("scheduling.k8s.io", "priorityclasses"), ("policy", "poddisruptionbudgets")}
    want |= {("events.k8s.io", "events")}
    assert granted == want
    for rule in rules:
        assert sorted(rule["verbs"]) == ["get", "list", "watch"]


def test_binding_gives_the_role_to_the_service_account() -> None:
    """The ClusterRoleBinding binds the reader role to the dashboard's ServiceAccount."""
    binding = one("ClusterRoleBinding", "dra-dashboard-reader")
    account = one("ServiceAccount", "dra-dashboard")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "dra-dashboard-reader",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "dra-dashboard", "namespace": "dra-dashboard"}
    ]
    assert account["metadata"]["namespace"] == "dra-dashboard"


def test_web_probes_health_and_readiness() -> None:
    """The web Deployment's liveness asks /healthz and readiness /readyz, with Host: localhost."""
    spec = one("Deployment", "dra-dashboard-web")["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert container["args"] == ["web"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["httpHeaders"] == [
            {"name": "Host", "value": "localhost"}
        ]
    config = one("ConfigMap", "dra-dashboard")["data"]
    assert "localhost" in config["DASHBOARD_ALLOWED_HOSTS"].split(",")


def test_worker_beat_and_migrate_run_the_same_image() -> None:
    """worker, beat and the migrate Job use the dashboard image with their own argument."""
    args = {name: spec["containers"][0]["args"] for name, spec in pod_specs()}
    assert args["dra-dashboard-worker"] == ["worker"]
    assert args["dra-dashboard-beat"] == ["beat"]
    assert args["dra-dashboard-migrate"] == ["migrate"]
    beat = one("Deployment", "dra-dashboard-beat")["spec"]
    assert beat["replicas"] == 1 and beat["strategy"]["type"] == "Recreate"
    images = {
        spec["containers"][0]["image"]
        for name, spec in pod_specs()
        if name != "dra-dashboard-redis"
    }
    assert images == {"dra-dashboard"}


def test_workers_are_replicated_spread_and_kept_by_a_budget() -> None:
    """At least two workers, preferably on different nodes, and a drain leaves one running."""
    worker = one("Deployment", "dra-dashboard-worker")["spec"]
    labels = worker["selector"]["matchLabels"]
    assert worker["replicas"] >= 2
    (term,) = worker["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == labels
    budget = one("PodDisruptionBudget", "dra-dashboard-worker")
    assert budget["apiVersion"] == "policy/v1"
    assert budget["spec"]["selector"]["matchLabels"] == labels
    assert 1 <= budget["spec"]["minAvailable"] < worker["replicas"]


@pytest.mark.parametrize("name", ["web", "worker", "beat", "migrate", "redis"])
def test_pods_run_as_non_root_with_read_only_root(name: str) -> None:
    """Every pod runs non-root, drops all capabilities and mounts its root filesystem read-only."""
    spec = dict(pod_specs())[f"dra-dashboard-{name}"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in spec["containers"]:
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}


def test_in_cluster_settings_and_secret_placeholders() -> None:
    """In-cluster config is on; the Secret carries placeholders for the URLs and the keys."""
    config = one("ConfigMap", "dra-dashboard")["data"]
    assert config["DASHBOARD_KUBE_IN_CLUSTER"] == "1"
    secret = one("Secret", "dra-dashboard")["stringData"]
    assert set(secret) == {
        "DASHBOARD_DATABASE_URL",
        "DASHBOARD_SECRET_KEY",
        "DASHBOARD_METRICS_TOKEN",
        "DASHBOARD_REDIS_URL",
    }
    assert all("CHANGE-ME" in value for value in secret.values())
    for name, spec in pod_specs():
        if name == "dra-dashboard-redis":
            continue
        sources = spec["containers"][0]["envFrom"]
        assert {"configMapRef": {"name": "dra-dashboard"}} in sources, name
        assert {"secretRef": {"name": "dra-dashboard"}} in sources, name


def test_dockerfile_builds_one_non_root_image() -> None:
    """python:3.11-slim, pinned install, static files collected at build, numeric non-root user."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert dockerfile.count("\nFROM ") + dockerfile.startswith("FROM ") == 1
    assert "FROM python:3.11-slim\n" in dockerfile
    assert "pip install -c constraints.txt ." in dockerfile
    assert "manage.py collectstatic --noinput" in dockerfile
    users = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("USER ")]
    assert users == ["10001:10001"]
    assert 'ENTRYPOINT ["dra-dashboard"]' in dockerfile


def test_entrypoint_starts_each_process() -> None:
    """The entrypoint is valid sh and maps web/worker/beat/migrate to their servers."""
    script = DEPLOY / "entrypoint.sh"
    subprocess.run(["sh", "-n", str(script)], check=True)
    text = script.read_text()
    assert "exec python -m console.serve --host 0.0.0.0" in text
    assert "console.asgi:application" in text
    assert "exec celery -A dashboard --quiet worker" in text
    assert "exec celery -A dashboard --quiet beat" in text
    assert "django_celery_beat.schedulers:DatabaseScheduler" in text
    assert "exec python manage.py migrate --noinput" in text


def test_prometheus_scrapes_with_the_metrics_token_from_the_secret() -> None:
    """The ServiceMonitor and the plain scrape job send the Secret's DASHBOARD_METRICS_TOKEN."""
    assert "DASHBOARD_METRICS_TOKEN" in one("Secret", "dra-dashboard")["stringData"]
    monitor = yaml.safe_load((DEPLOY / "prometheus" / "servicemonitor.yaml").read_text())
    assert monitor["kind"] == "ServiceMonitor"
    service = one("Service", "dra-dashboard")
    labels = service["metadata"]["labels"].items()
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": "dra-dashboard", "key": "DASHBOARD_METRICS_TOKEN"},
    }
    config = yaml.safe_load((DEPLOY / "prometheus" / "scrape-config.yaml").read_text())
    [job] = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["authorization"]["type"] == "Bearer"
    assert job["authorization"]["credentials_file"].endswith("/DASHBOARD_METRICS_TOKEN")
    [target] = job["static_configs"][0]["targets"]
    hosts = one("ConfigMap", "dra-dashboard")["data"]["DASHBOARD_ALLOWED_HOSTS"].split(",")
    assert target.rpartition(":")[0] in hosts
