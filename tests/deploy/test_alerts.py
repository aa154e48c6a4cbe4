"""The alerts and the Grafana dashboard in deploy/: promtool accepts the rules and passes their unit
tests, and every expression names only metrics and labels that /metrics exports.

promtool comes from Debian's `prometheus` package (bin/system-deps installs it); without it these
tests fail, they never skip.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from console.metrics import as_samples, render_metrics
from inventory.models import SyncState
from tests.console.demo import load_demo
from tests.paths import ROOT

PROMETHEUS = ROOT / "deploy" / "prometheus"
RULES = PROMETHEUS / "rules.yaml"
RULE_TESTS = PROMETHEUS / "rules.test.yaml"
GRAFANA = ROOT / "deploy" / "grafana" / "dra-dashboard.json"
NOW = datetime(2026, 3, 3, 0, 0, tzinfo=UTC)
SEVERITIES = {"warning", "critical"}

METRIC = re.compile(r"\b(dra_dashboard_[a-z0-9_]+)\b")
SELECTOR = re.compile(r"\b(dra_dashboard_[a-z0-9_]+)\{([^}]*)\}")
MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"')
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
TEMPLATE_LABEL = re.compile(r"\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)")
# Labels Prometheus puts on `up` and every scraped series.
TARGET_LABELS = {"job", "instance"}


def promtool() -> str:
    binary = shutil.which("promtool")
    assert binary, "promtool is missing: install Debian's prometheus package (bin/system-deps)"
    return binary


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args], capture_output=True, text=True, timeout=120, check=False
    )


def prometheus_rule() -> dict[str, Any]:
    return yaml.safe_load(RULES.read_text())


def alerts() -> list[dict[str, Any]]:
    return [rule for group in prometheus_rule()["spec"]["groups"] for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    return json.loads(GRAFANA.read_text())


def panels() -> Iterator[dict[str, Any]]:
    for panel in dashboard()["panels"]:
        yield panel
        yield from panel.get("panels", [])


def panel_expressions() -> list[tuple[str, str]]:
    return [
        (f"panel {panel['title']!r} {target['refId']}", target["expr"])
        for panel in panels()
        for target in panel.get("targets", [])
    ]


def rule_expressions() -> list[tuple[str, str]]:
    return [(f"alert {rule['alert']}", rule["expr"]) for rule in alerts()]


@pytest.fixture
def plain_rules(tmp_path: Path) -> Path:
    """The PrometheusRule's spec as the plain rule file promtool reads, beside a copy of the
    unit tests (which name it `rules.yaml`); the directory is returned."""
    document = prometheus_rule()
    assert document["apiVersion"] == "monitoring.coreos.com/v1"
    assert document["kind"] == "PrometheusRule"
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(document["spec"], sort_keys=False))
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    return tmp_path


def test_promtool_checks_the_rules(plain_rules: Path) -> None:
    """`promtool check rules` accepts the rule file, templates included, and counts every alert."""
    result = run_promtool("check", "rules", str(plain_rules / "rules.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in result.stdout


def test_promtool_unit_tests_pass(plain_rules: Path) -> None:
    """`promtool test rules` passes every firing and quiet case in rules.test.yaml."""
    result = run_promtool("test", "rules", str(plain_rules / RULE_TESTS.name))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests_catch_a_changed_threshold(plain_rules: Path) -> None:
    """The unit tests fail when an alert's threshold moves: they test the rules, not nothing."""
    rules = plain_rules / "rules.yaml"
    rules.write_text(rules.read_text().replace("> 900", "> 1800"))
    result = run_promtool("test", "rules", str(plain_rules / RULE_TESTS.name))
    assert result.returncode != 0
    assert "alertname: DRAClaimPendingTooLong" in result.stdout + result.stderr


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    """Each alert is tested firing (expected alerts) and not firing (none expected)."""
    cases: dict[str, list[bool]] = defaultdict(list)
    tests = yaml.safe_load(RULE_TESTS.read_text())
    assert tests["rule_files"] == ["rules.yaml"]
    for test in tests["tests"]:
        for case in test["alert_rule_test"]:
            cases[case["alertname"]].append(bool(case.get("exp_alerts")))
    for rule in alerts():
        assert True in cases[rule["alert"]], f"{rule['alert']} never tested firing"
        assert False in cases[rule["alert"]], f"{rule['alert']} never tested quiet"


def test_every_alert_has_severity_summary_and_description() -> None:
    """Severity label, summary and description; the annotations name labels the alert carries."""
    names = [rule["alert"] for rule in alerts()]
    assert len(names) == len(set(names))
    assert {"DRAClaimPendingTooLong", "DRADeviceClassExhausted", "DRALeakedAllocations"} <= set(
        names
    )
    assert {"DRADashboardSyncStale", "DRADashboardDown"} <= set(names)
    for rule in alerts():
        assert rule["labels"]["severity"] in SEVERITIES, rule["alert"]
        annotations = rule["annotations"]
        assert annotations["summary"].strip() and annotations["description"].strip()
        carried = set(re.findall(r"[a-zA-Z_]\w*", rule["expr"]))
        if re.search(r"\bup\b", rule["expr"]):
            carried |= TARGET_LABELS
        for text in annotations.values():
            for label in TEMPLATE_LABEL.findall(text):
                assert label in carried, f"{rule['alert']}: $labels.{label} is not in its expr"


def test_the_prometheus_rule_is_in_the_optional_kustomization() -> None:
    """deploy/prometheus/ applies as its own kustomization: the ServiceMonitor and the rules."""
    kustomization = yaml.safe_load((PROMETHEUS / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == ["rules.yaml", "servicemonitor.yaml"]
    assert kustomization["namespace"] == prometheus_rule()["metadata"]["namespace"]


def test_service_monitor_scrapes_an_allowed_host_and_keeps_the_metrics_labels() -> None:
    """The ServiceMonitor sends a Host the dashboard allows (the Service's name, not a pod IP)
    and honours the metrics' own `namespace` label instead of renaming it `exported_namespace`.
    """
    monitor = yaml.safe_load((PROMETHEUS / "servicemonitor.yaml").read_text())
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["honorLabels"] is True
    [address] = [r for r in endpoint["relabelings"] if r.get("targetLabel") == "__address__"]
    configmap = yaml.safe_load((ROOT / "deploy" / "configmap.yaml").read_text())
    hosts = configmap["data"]["DASHBOARD_ALLOWED_HOSTS"].split(",")
    assert address["replacement"].rpartition(":")[0] in hosts


def test_grafana_dashboard_is_self_contained() -> None:
    """A current schema, the data source as a template variable, no links leaving the file."""
    board = dashboard()
    assert board["schemaVersion"] >= 39
    assert board["uid"] and board["title"]
    assert board["links"] == []
    assert "http://" not in GRAFANA.read_text() and "https://" not in GRAFANA.read_text()
    [variable] = [v for v in board["templating"]["list"] if v["name"] == "datasource"]
    assert (variable["type"], variable["query"]) == ("datasource", "prometheus")
    source = {"type": "prometheus", "uid": "${datasource}"}
    ids = [panel["id"] for panel in panels()]
    assert len(ids) == len(set(ids))
    for panel in panels():
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == source, panel["title"]
        refs = [target["refId"] for target in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == source and target["expr"].strip(), panel["title"]


def test_grafana_dashboard_shows_what_an_sre_asks_for() -> None:
    """Free and total physical units per class, pending claims and their age, leaks, sync
    staleness, what-if latency quantiles and watch events per second each have a panel."""
    used = {name for _, expr in panel_expressions() for name in METRIC.findall(expr)}
    exprs = " ".join(expr for _, expr in panel_expressions())
    assert 'dra_dashboard_class_units{state="free"}' in exprs
    assert 'dra_dashboard_class_units{state="total"}' in exprs
    assert {
        "dra_dashboard_pending_claims",
        "dra_dashboard_pending_claim_oldest_age_seconds",
        "dra_dashboard_leaks",
        "dra_dashboard_sync_verified_age_seconds",
        "dra_dashboard_sync_events_total",
        "dra_dashboard_whatif_seconds_bucket",
    } <= used
    assert "histogram_quantile(0.99," in exprs


@pytest.fixture
def exported(db) -> dict[str, dict[str, set[str]]]:
    """{sample name: {label: values}} of /metrics on the 10-node demo cluster with synced kinds,
    so that every family has samples."""
    load_demo(nodes=10, seed=1)
    for index, kind in enumerate(("DeviceClass", "ResourceSlice", "ResourceClaim", "Pod")):
        SyncState.objects.create(
            kind=kind,
            served=True,
            resource_version=str(100 + index),
            cursor_valid=True,
            verified_at=NOW - timedelta(seconds=30),
            last_event_at=NOW - timedelta(seconds=10),
            heartbeat_at=NOW - timedelta(seconds=2),
            events_total=50,
        )
    found: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for name, labels in as_samples(render_metrics(now=NOW).decode()):
        entry = found[name]  # label-less samples are names too
        for label, value in labels:
            entry[label].add(value)
    return dict(found)


@pytest.mark.parametrize("source", [rule_expressions, panel_expressions], ids=["alerts", "grafana"])
def test_expressions_name_only_exported_metrics_and_labels(exported, source) -> None:
    """Each dra_dashboard_ name is a sample /metrics exports, each matcher and grouping label is
    one such sample carries, and each exact matcher value occurs: a rename fails here."""
    for where, expr in source():
        names = set(METRIC.findall(expr))
        missing = names - set(exported)
        assert not missing, f"{where}: {sorted(missing)} not in /metrics"
        for name, matchers in SELECTOR.findall(expr):
            for label, operator, value in MATCHER.findall(matchers):
                assert label in exported[name], f"{where}: {name} has no label {label}"
                if operator == "=":
                    assert value in exported[name][label], f"{where}: {name}{{{label}={value}}}"
        if not names:
            assert re.search(r"\bup\{", expr), f"{where}: names no dashboard metric"
            continue
        carried = set().union(*(set(exported[name]) for name in names))
        for group in GROUPING.findall(expr):
            for label in filter(None, (part.strip() for part in group.split(","))):
                assert label in carried, f"{where}: no metric it names carries {label}"
