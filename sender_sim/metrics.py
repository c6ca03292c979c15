"""The observability list as one typed snapshot, computed from the store at a given time.

``attempts_by_classification`` (acknowledged and not), ``oldest_eligible_age`` (how long the oldest
due delivery has waited), ``deadline_cohorts`` (live deliveries by time left before their
deadline), the two kinds of lease-expiry duplicate — ``lease_expiry_duplicates`` (a stale worker's
ack refused after its lease was taken over) and ``lease_expiry_resends`` (attempts sent by the
worker that took an expired lease over: the resend after a crash) — ``dlq_by_reason``, the
redrive outcomes — ``redrive_outcomes`` (decisions queued / refused) and ``redriven_deliveries``
(what became of them: ``delivered``, ``dead_again``, ``pending``) — and ``threatened``: the live
deliveries whose next safe attempt no longer fits before their deadline, the alert that queue
length cannot give — and ``event_only``: events no callback could be scheduled for, by status.
:mod:`sender_sim.exposition` renders a snapshot in the Prometheus text format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
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
    """Stale acks refused: a worker answered after its lease had been taken over."""
    dlq_by_reason: Mapping[str, int]
    redrive_outcomes: Mapping[str, int]
    """Redrive decisions by result (``queued`` / ``refused``)."""
    threatened: tuple[str, ...]
    lease_expiry_resends: int = 0
    """Attempts sent under a lease taken over after expiry (the resend after a crash)."""
    redriven_deliveries: Mapping[str, int] = field(default_factory=dict)
    """Redriven deliveries by what became of them: ``delivered``, ``dead_again``, ``pending``."""
    event_only: Mapping[str, int] = field(default_factory=dict)
    """Events without a retained delivery, by event-only status."""

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
            "lease_expiry_resends": self.lease_expiry_resends,
            "dlq_by_reason": dict(self.dlq_by_reason),
            "redrive_outcomes": dict(self.redrive_outcomes),
            "redriven_deliveries": dict(self.redriven_deliveries),
            "threatened": list(self.threatened),
            "event_only": dict(self.event_only),
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
        lines.append(
            f"  lease-expiry duplicates: {self.lease_expiry_duplicates} stale ack(s) refused, "
            f"{self.lease_expiry_resends} resend(s) after lease expiry"
        )
        lines.append("  DLQ by reason: " + _pairs(self.dlq_by_reason))
        lines.append(
            "  redrive outcomes: decisions "
            + _pairs(self.redrive_outcomes)
            + "; redriven deliveries "
            + _pairs(self.redriven_deliveries)
        )
        lines.append(
            f"  next safe attempt past deadline: {len(self.threatened)}"
            + (f" ({', '.join(self.threatened[:10])})" if self.threatened else "")
        )
        lines.append("  event-only events: " + _pairs(self.event_only))
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
    resends = store.counts(
        "SELECT 'n', count(*) FROM attempts a WHERE EXISTS (SELECT 1 FROM ledger l"
        " WHERE l.delivery_id = a.delivery_id AND l.cause = 'lease_taken_over'"
        " AND json_extract(l.details, '$.token') = a.fencing_token)"
    ).get("n", 0)
    redriven = store.counts(
        "SELECT CASE state WHEN 'delivered' THEN 'delivered' WHEN 'dead_letter' THEN 'dead_again'"
        " ELSE 'pending' END, count(*) FROM deliveries WHERE redrives > 0 GROUP BY 1"
    )
    event_only = store.counts(
        "SELECT status, count(*) FROM events INDEXED BY events_only WHERE status IS NOT NULL"
        " GROUP BY status"
    )
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
        lease_expiry_resends=resends,
        redriven_deliveries=redriven,
        event_only=event_only,
    )
