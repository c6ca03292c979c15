"""The metrics snapshot in the Prometheus text exposition format, through ``prometheus_client``.

Every item of the observability list becomes one metric family, prefixed ``hookproof_sender_``:
counts by label (state, classification, reason, outcome, status), the oldest eligible delivery's
wait and each deadline cohort's size and least time left (seconds), and
``hookproof_sender_threatened_deliveries``: the live deliveries whose next safe attempt no longer
fits before their deadline.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import timedelta

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from sender_sim.metrics import MetricsSnapshot

__all__ = ["PREFIX", "prometheus_text"]

PREFIX = "hookproof_sender_"


def _labelled(name: str, doc: str, label: str, values: Mapping[str, int]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(PREFIX + name, doc, labels=[label])
    for key, value in sorted(values.items()):
        family.add_metric([key], value)
    return family


def _plain(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, doc, value=value)


def _seconds(value: timedelta | None) -> float:
    return 0.0 if value is None else value.total_seconds()


class _SnapshotCollector(Collector):
    def __init__(self, snapshot: MetricsSnapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[GaugeMetricFamily]:
        s = self.snapshot
        yield _labelled("deliveries", "Deliveries by state.", "state", s.states)
        yield _labelled(
            "attempts",
            "Attempts by classification.",
            "classification",
            s.attempts_by_classification,
        )
        yield _plain(
            "oldest_eligible_age_seconds",
            "How long the oldest due delivery has waited.",
            _seconds(s.oldest_eligible_age),
        )
        cohorts = GaugeMetricFamily(
            PREFIX + "deadline_cohort_deliveries",
            "Live deliveries by time left before their deadline.",
            labels=["cohort"],
        )
        least = GaugeMetricFamily(
            PREFIX + "deadline_cohort_min_remaining_seconds",
            "The least time left before the deadline in each non-empty cohort.",
            labels=["cohort"],
        )
        for cohort in s.deadline_cohorts:
            cohorts.add_metric([cohort.label], cohort.count)
            if cohort.min_remaining is not None:
                least.add_metric([cohort.label], _seconds(cohort.min_remaining))
        yield cohorts
        yield least
        yield _plain(
            "lease_expiry_duplicates",
            "Stale acks refused after a lease was taken over.",
            s.lease_expiry_duplicates,
        )
        yield _plain(
            "lease_expiry_resends",
            "Attempts sent after taking an expired lease over.",
            s.lease_expiry_resends,
        )
        yield _labelled("dlq_entries", "Dead letters by reason.", "reason", s.dlq_by_reason)
        yield _labelled(
            "redrive_decisions", "Redrive decisions by result.", "result", s.redrive_outcomes
        )
        yield _labelled(
            "redriven_deliveries",
            "Redriven deliveries by what became of them.",
            "outcome",
            s.redriven_deliveries,
        )
        yield _plain(
            "threatened_deliveries",
            "Live deliveries whose next safe attempt no longer fits before their deadline.",
            len(s.threatened),
        )
        yield _labelled(
            "event_only_events", "Events without a retained delivery.", "status", s.event_only
        )


def prometheus_text(snapshot: MetricsSnapshot) -> str:
    """``snapshot`` in the Prometheus text exposition format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SnapshotCollector(snapshot))
    return generate_latest(registry).decode("utf-8")
