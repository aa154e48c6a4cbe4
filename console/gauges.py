"""The one spelling of the dashboard's metric names: every family `/metrics` exports is named
here."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.metrics_core import GaugeMetricFamily

PREFIX = "dra_dashboard_"


def gauge(name: str, documentation: str, labels: Sequence[str]) -> GaugeMetricFamily:
    """A gauge family named `dra_dashboard_<name>`."""
    return GaugeMetricFamily(PREFIX + name, documentation, labels=list(labels))
