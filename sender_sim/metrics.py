"""Seed 000's observability list as one typed snapshot, computed from the store at a given time.

``attempts_by_classification`` (acknowledged and not), ``oldest_eligible_age`` (how long the oldest
due delivery has waited), ``deadline_cohorts`` (live deliveries by time left before their
deadline), ``lease_expiry_duplicates`` (refused stale acks), ``dlq_by_reason``,
``redrive_outcomes`` (decisions queued / refused) and ``threatened``: the live deliveries whose
next safe attempt no longer fits before their deadline — the alert that queue length cannot give.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sender_sim.policy import Policy
from sender_sim.records import State, format_duration, rfc3339, to_us
from sender_sim.store import SQLiteStore

__all__ = ["COHORTS", "Cohort", "MetricsSnapshot", "snapshot"]

COHORTS: tuple[tuple[str, timedelta | None], ...] = (
    ("past deadline", timedelta(0)),
    ("< 1m", timedelta(minutes=1)),
    ("< 5m", timedelta(minutes=5)),
    ("< 15m", timedelta(minutes=15)),
    ("< 1h", timedelta(hours=1)),
    ("< 6h", timedelta(hours=6)),
    ("< 24h", timedelta(hours=24)),
    (">= 24h", None),
)
"""Deadline cohorts: a live delivery falls in the first whose bound exceeds its time left."""


@dataclass(frozen=True)
class Cohort:
    label: str
    count: int
    min_remaining: timedelta | None


@dataclass(frozen=True)
class MetricsSnapshot:
    at: datetime
    states: Mapping[str, int]
    attempts_by_classification: Mapping[str, int]
    oldest_eligible_age: timedelta | None
    deadline_cohorts: tuple[Cohort, ...]
    lease_expiry_duplicates: int
    dlq_by_reason: Mapping[str, int]
    redrive_outcomes: Mapping[str, int]
    threatened: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: durations as text and as integer microseconds."""

        def us(value: timedelta | None) -> int | None:
            return None if value is None else value // timedelta(microseconds=1)

        return {
            "at": rfc3339(self.at),
            "states": dict(self.states),
            "attempts_by_classification": dict(self.attempts_by_classification),
            "oldest_eligible_age_us": us(self.oldest_eligible_age),
            "deadline_cohorts": [
                {"label": c.label, "count": c.count, "min_remaining_us": us(c.min_remaining)}
                for c in self.deadline_cohorts
            ],
            "lease_expiry_duplicates": self.lease_expiry_duplicates,
            "dlq_by_reason": dict(self.dlq_by_reason),
            "redrive_outcomes": dict(self.redrive_outcomes),
            "threatened": list(self.threatened),
        }

    def render(self) -> str:
        """A short plain-text report."""
        lines = [f"metrics at {rfc3339(self.at)}"]
        lines.append("  states: " + _pairs(self.states))
        lines.append("  attempts by classification: " + _pairs(self.attempts_by_classification))
        age = self.oldest_eligible_age
        lines.append(
            "  oldest eligible delivery waiting: " + (format_duration(age) if age else "-")
        )
        lines.append(
            "  deadline cohorts: "
            + (", ".join(f"{c.label}: {c.count}" for c in self.deadline_cohorts if c.count) or "-")
        )
        lines.append(f"  lease-expiry duplicates: {self.lease_expiry_duplicates}")
        lines.append("  DLQ by reason: " + _pairs(self.dlq_by_reason))
        lines.append("  redrive outcomes: " + _pairs(self.redrive_outcomes))
        lines.append(
            f"  next safe attempt past deadline: {len(self.threatened)}"
            + (f" ({', '.join(self.threatened[:10])})" if self.threatened else "")
        )
        return "\n".join(lines)


def _pairs(values: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(values.items())) or "-"


def snapshot(store: SQLiteStore, policy: Policy, now: datetime) -> MetricsSnapshot:
    """The metrics at ``now``."""
    now_us = to_us(now)
    states = store.counts("SELECT state, count(*) FROM deliveries GROUP BY state")
    by_class = store.counts("SELECT classification, count(*) FROM attempts GROUP BY classification")
    dlq = store.counts(
        "SELECT reason, count(*) FROM deliveries WHERE state = 'dead_letter' GROUP BY reason"
    )
    redrives = store.counts("SELECT result, count(*) FROM redrive_decisions GROUP BY result")
    duplicates = store.counts(
        "SELECT 'n', count(*) FROM ledger INDEXED BY ledger_stale"
        " WHERE cause = 'stale_ack_refused' AND delivery_id IS NOT NULL"
    ).get("n", 0)
    oldest: timedelta | None = None
    buckets: dict[str, list[timedelta]] = {label: [] for label, _ in COHORTS}
    threatened: list[str] = []
    for delivery in store.live():
        remaining = delivery.deadline_at - now
        for label, bound in COHORTS:
            if bound is None or remaining < bound:
                buckets[label].append(remaining)
                break
        if delivery.state is State.SCHEDULED:
            due = delivery.next_attempt_at
            assert due is not None
            if to_us(due) <= now_us:
                age = now - due
                oldest = age if oldest is None or age > oldest else oldest
            start = max(now, due)
        else:
            start = max(now, delivery.lease_expires_at or now)
        if not policy.fits(start, delivery.deadline_at):
            threatened.append(delivery.delivery_id)
    cohorts = tuple(
        Cohort(label, len(values), min(values) if values else None)
        for label, values in buckets.items()
    )
    return MetricsSnapshot(
        at=now,
        states=states,
        attempts_by_classification=by_class,
        oldest_eligible_age=oldest,
        deadline_cohorts=cohorts,
        lease_expiry_duplicates=duplicates,
        dlq_by_reason=dlq,
        redrive_outcomes=redrives,
        threatened=tuple(sorted(threatened)),
    )
