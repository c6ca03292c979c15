"""What each dashboard page shows, as plain data built from the engine (no HTML here).

The templates in ``templates_html/`` render these values; the JSON API serialises the same ones.
:func:`delivery_view` is the delivery page: the attempt timeline (scheduled, started, ended,
classification, answer, latency, response sample), the request as sent (from the
:class:`~sender_sim.sandbox.wiretap.WireTap`, else rebuilt), the body pretty-printed and exact,
the ledger once, the deadline and the time left, and which actions are possible now or why not.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sender_sim.commands.support import describe_row, transition_text
from sender_sim.exceptions import ConfigurationError
from sender_sim.records import (
    Attempt,
    Delivery,
    Event,
    LedgerRow,
    State,
    format_duration,
    rfc3339,
)
from sender_sim.sandbox import queries
from sender_sim.sandbox.chart import tone
from sender_sim.sandbox.engine import SandboxEngine
from sender_sim.sandbox.wiretap import SentRequest, reconstructed

__all__ = [
    "FILTER_FIELDS",
    "Action",
    "AttemptView",
    "DeliveryView",
    "LedgerView",
    "actions_for",
    "delivery_view",
    "parse_filter",
    "row_dict",
    "time_left",
]

_SCHEDULE_KEYS = ("start", "next_at", "due")
TIME_FILTERS = ("event_from", "event_to", "delivered_from", "delivered_to")
TEXT_FILTERS = ("status", "http_class", "endpoint_id", "business_key")
FILTER_FIELDS = (*TIME_FILTERS, *TEXT_FILTERS)
"""The list's filters: the query parameters of ``/``, ``/export.csv`` and ``/api/deliveries``."""


@dataclass(frozen=True)
class Action:
    """One action on a delivery: ``possible`` now, or ``why_not``."""

    name: str
    possible: bool
    why_not: str = ""


@dataclass(frozen=True)
class AttemptView:
    attempt: Attempt
    scheduled_at: datetime | None
    latency: str
    answer: str
    tone: str
    request: SentRequest


@dataclass(frozen=True)
class LedgerView:
    at: str
    transition: str
    actor: str
    text: str
    note: bool


@dataclass(frozen=True)
class DeliveryView:
    delivery: Delivery
    event: Event
    attempts: tuple[AttemptView, ...]
    ledger: tuple[LedgerView, ...]
    actions: tuple[Action, ...]
    request: SentRequest | None
    """The last request sent (``None``: no attempt yet)."""
    body_pretty: str
    body_exact: str
    body_bytes: int
    body_sha256: str
    time_left: str
    endpoint_url: str

    def action(self, name: str) -> Action:
        return next(a for a in self.actions if a.name == name)


def _time(name: str, text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigurationError(
            f"{name} {text!r} is not a time (use 2026-08-13T09:00 or RFC 3339)"
        ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def parse_filter(params: Mapping[str, str]) -> queries.RowFilter:
    """A :class:`~.queries.RowFilter` from query parameters (blank ones ignored);
    ``ConfigurationError`` for a bad value."""
    given = {k: params.get(k, "").strip() for k in (*TIME_FILTERS, *TEXT_FILTERS, "kind")}
    times = {k: _time(k, given[k]) if given[k] else None for k in TIME_FILTERS}
    texts = {k: given[k] or None for k in (*TEXT_FILTERS, "kind")}
    return queries.RowFilter(**times, **texts)  # type: ignore[arg-type]


def time_left(delivery: Delivery, now: datetime) -> str:
    """The time left before the deadline, to the second once it is more than a minute."""
    left = delivery.deadline_at - now
    if abs(left) > timedelta(minutes=1):
        left = timedelta(seconds=round(left.total_seconds()))
    if left < timedelta(0):
        return "passed " + format_duration(-left) + " ago"
    return format_duration(left)


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _schedule(ledger: Sequence[LedgerRow]) -> list[datetime]:
    times: list[datetime] = []
    for row in ledger:
        for key in _SCHEDULE_KEYS:
            when = _parse_time(row.details.get(key))
            if when is not None:
                times.append(when)
        if row.to_state is State.SCHEDULED and not any(k in row.details for k in _SCHEDULE_KEYS):
            times.append(row.at)
    return sorted(times)


def _answer(attempt: Attempt) -> str:
    if attempt.status is not None:
        return f"HTTP {attempt.status}"
    return attempt.kind.value + (f": {attempt.error}" if attempt.error else "")


def actions_for(engine: SandboxEngine, delivery: Delivery) -> tuple[Action, ...]:
    """Resend and redrive: possible now, or why not."""
    if delivery.state in (State.SCHEDULED, State.LEASED):
        due = delivery.next_attempt_at
        owned = f"it is {delivery.state.value}: automatic processing owns it" + (
            f" (next attempt due {rfc3339(due)})" if due else ""
        )
        return (Action("resend", False, owned), Action("redrive", False, owned))
    blocked = queries.endpoint_problem(engine.sim, delivery.endpoint_id)
    resend = Action("resend", True) if blocked is None else Action("resend", False, blocked)
    if delivery.state is State.DEAD_LETTER:
        return (resend, Action("redrive", True))
    return (
        resend,
        Action("redrive", False, "only a dead letter can be redriven; it was delivered"),
    )


def _pretty(body: bytes) -> str:
    try:
        return json.dumps(json.loads(body), indent=2, ensure_ascii=False, sort_keys=False)
    except (ValueError, UnicodeDecodeError):
        return body.decode("utf-8", "replace")


def delivery_view(engine: SandboxEngine, delivery_id: str) -> DeliveryView:
    """The delivery page's data (``NotFound`` for an unknown id)."""
    sim = engine.sim
    delivery = engine.delivery(delivery_id)
    did = delivery.delivery_id
    event = sim.event(delivery.event_id)
    ledger = sim.ledger(did)
    schedule = _schedule(ledger)
    views = []
    for a in sim.attempts(did):
        earlier = [t for t in schedule if t <= a.started_at]
        views.append(
            AttemptView(
                a,
                earlier[-1] if earlier else None,
                format_duration(a.ended_at - a.started_at),
                _answer(a),
                tone(a.classification),
                engine.wiretap.get(did, a.number) or reconstructed(delivery, event, a),
            )
        )
    rows = tuple(
        LedgerView(
            rfc3339(r.at), transition_text(r), r.actor, describe_row(r), not r.is_state_change
        )
        for r in ledger
    )
    return DeliveryView(
        delivery=delivery,
        event=event,
        attempts=tuple(views),
        ledger=rows,
        actions=actions_for(engine, delivery),
        request=views[-1].request if views else None,
        body_pretty=_pretty(event.body),
        body_exact=event.body.decode("utf-8", "replace"),
        body_bytes=len(event.body),
        body_sha256=hashlib.sha256(event.body).hexdigest(),
        time_left=time_left(delivery, sim.now()),
        endpoint_url=delivery.destination_url,
    )


def row_dict(row: queries.Row) -> dict[str, Any]:
    """One list row as JSON."""
    d = row.delivery
    return {
        "kind": row.kind,
        "delivery_id": d.delivery_id,
        "event_id": d.event_id,
        "event_type": row.event.type,
        "business_key": d.business_key,
        "endpoint_id": d.endpoint_id,
        "status": d.state.value,
        "reason": d.reason.value if d.reason else None,
        "attempts": row.attempts,
        "max_attempts": d.max_attempts,
        "http_class": row.http_class,
        "last_status": row.last.status if row.last else None,
        "last_classification": row.last.classification if row.last else None,
        "event_at": rfc3339(row.event.occurred_at),
        "delivered_at": rfc3339(row.delivered_at) if row.delivered_at else None,
        "deadline_at": rfc3339(d.deadline_at),
    }


def delivery_dict(view: DeliveryView) -> dict[str, Any]:
    """The delivery page's data as JSON (the request headers redacted, the body as text)."""
    d = view.delivery
    return {
        "delivery_id": d.delivery_id,
        "event_id": d.event_id,
        "event_type": view.event.type,
        "business_key": d.business_key,
        "status": d.state.value,
        "reason": d.reason.value if d.reason else None,
        "deadline_at": rfc3339(d.deadline_at),
        "time_left": view.time_left,
        "destination_url": d.destination_url,
        "body": view.body_exact,
        "body_sha256": view.body_sha256,
        "attempts": [
            {
                "number": a.attempt.number,
                "scheduled_at": rfc3339(a.scheduled_at) if a.scheduled_at else None,
                "started_at": rfc3339(a.attempt.started_at),
                "ended_at": rfc3339(a.attempt.ended_at),
                "classification": a.attempt.classification,
                "status": a.attempt.status,
                "outcome": a.attempt.kind.value,
                "latency": a.latency,
                "acked": a.attempt.acked,
                "response_sample": a.attempt.response_sample,
                "request_headers": dict(a.request.headers),
                "request_captured": a.request.captured,
            }
            for a in view.attempts
        ],
        "ledger": [
            {"at": r.at, "transition": r.transition, "actor": r.actor, "text": r.text}
            for r in view.ledger
        ],
        "actions": {a.name: {"possible": a.possible, "why_not": a.why_not} for a in view.actions},
    }


def dlq_groups(
    summary: Mapping[str, Mapping[str, int]],
) -> list[tuple[str, int, list[tuple[str, int]]]]:
    """The DLQ summary as (reason, total, [(business key, count)]) sorted by reason."""
    return [
        (reason, sum(keys.values()), sorted(keys.items()))
        for reason, keys in sorted(summary.items())
    ]
