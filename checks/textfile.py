"""The node_exporter textfile (Prometheus text exposition format) that ascend-check writes, rendered by
prometheus_client: each textfile is one collector of gauge families; the families two textfiles share
(host reachable, last run) are built here once."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["Families", "gauge", "host_reachable", "last_run", "render"]


def gauge(name: str, documentation: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    """A gauge family with these label names (a sample's label values come in the same order)."""
    return GaugeMetricFamily(name, documentation, labels=list(labels))


def host_reachable(hosts: Iterable[tuple[str, bool]]) -> GaugeMetricFamily:
    """ascend_check_host_reachable per (host, answered over SSH); 0 is what AscendCheckNodeNotProbed
    alerts on."""
    family = gauge("ascend_check_host_reachable", "1 when the host answered over SSH.", ["host"])
    for host, reachable in hosts:
        family.add_metric([host], int(reachable))
    return family


def last_run(timestamp: float) -> GaugeMetricFamily:
    """When the report was made (seconds since the epoch): AscendCheckTextfileStale compares it to time()."""
    return GaugeMetricFamily(
        "ascend_check_last_run_timestamp_seconds", "When the report was made.", value=float(round(timestamp))
    )


class Families(Collector):
    """A collector of families built beforehand: a textfile is a snapshot of one run, not live values."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def render(families: Iterable[Metric]) -> str:
    """The text exposition of these families (prometheus_client's generate_latest), in their order."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Families(families))
    return generate_latest(registry).decode()
