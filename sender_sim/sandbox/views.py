"""What each dashboard page shows, as plain data built from the engine (no HTML here).

The templates in ``templates_html/`` render these values; the JSON API serialises the same ones.
:func:`delivery_view` is the delivery page: the attempt timeline (scheduled, started, ended,
classification, answer, latency, response sample), the request as sent (from the
:class:`~sender_sim.sandbox.wiretap.WireTap`, else rebuilt), the body pretty-printed and exact,
the ledger once, the deadline and the time left, and which actions are possible now or why not.
:func:`event_view` is the event page (an event-only row has no delivery): its status, body and
retained deliveries, and whether the library's resend would take it now. The list's rows are the
library's (:func:`list_rows`); a resend is possible exactly when
:meth:`~sender_sim.simulator.Simulator.resend_refusals` finds nothing against it, and otherwise
the page shows the library's reason.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from receiver.redaction import shown_url
from sender_sim.commands.support import describe_row, transition_text
from sender_sim.exceptions import ConfigurationError
from sender_sim.records import (
    Attempt,
    DeadLetterReason,
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
    "EventView",
    "LedgerView",
    "ListRow",
    "actions_for",
    "delivery_view",
    "event_view",
    "export_csv",
    "export_refusal",
    "list_rows",
    "parse_filter",
    "resend_refusal",
    "row_dict",
    "time_left",
]

_SCHEDULE_KEYS = ("start", "next_at", "due")
FILTER_FIELDS = queries.FILTER_FIELDS
"""The list's filters: the query parameters of ``/``, ``/export.csv`` and ``/api/deliveries``."""
TIME_FILTERS = ("event_from", "event_to", "delivered_from", "delivered_to")
TEXT_FILTERS = tuple(f for f in FILTER_FIELDS if f not in TIME_FILTERS)


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
    """The library's :class:`~sender_sim.inspection.RowFilter` from query parameters (blank
    ones ignored); ``ConfigurationError`` (the library's) for a bad value."""
    given = {k: params.get(k, "").strip() for k in FILTER_FIELDS}
    times = {k: _time(k, given[k]) if given[k] else None for k in TIME_FILTERS}
    texts = {k: given[k] or None for k in TEXT_FILTERS}
    return queries.RowFilter(**times, **texts)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ListRow:
    """One row of the list: the library's row, and the last attempt to show its answer."""

    row: queries.Row
    last: Attempt | None

    @property
    def link(self) -> str:
        d = self.row.delivery
        if d is not None:
            return f"/deliveries/{quote(d.delivery_id, safe='')}"
        return f"/events/{quote(self.row.event.event_id, safe='')}"


def export_csv(engine: SandboxEngine, where: queries.RowFilter) -> tuple[bytes, int]:
    """The filtered rows as CSV bytes and their count (``ExportTooLarge`` past the cap: nothing
    is returned, never a partial file)."""
    out = io.StringIO()
    count = engine.sim.export_csv(where, out)
    return out.getvalue().encode("utf-8"), count


def export_refusal(error: queries.ExportTooLarge) -> tuple[int, str, str, str, dict[str, object]]:
    """The problem an export over the cap is answered with: status, type, title, detail, extras."""
    extra: dict[str, object] = {"code": error.code, "count": error.count, "limit": error.limit}
    return 422, "export-too-large", "Export too large", str(error), extra


def resend_refusal(refused: queries.ResendRefused) -> tuple[int, str, str, str, dict[str, object]]:
    """The problem a refused resend is answered with: status, type, title, detail, extras."""
    extra: dict[str, object] = {"code": refused.code, "ineligible": refused.ineligible}
    return 409, "resend-refused", "Resend refused: nothing was queued", str(refused), extra


def list_rows(engine: SandboxEngine, where: queries.RowFilter, limit: int) -> list[ListRow]:
    """The library's rows for ``where``, newest first, each with its last attempt."""
    found = queries.newest_first(engine.sim, where, limit)
    out = []
    for row in found:
        attempts = engine.sim.attempts(row.delivery.delivery_id) if row.delivery else []
        out.append(ListRow(row, attempts[-1] if attempts else None))
    return out


def resend_action(engine: SandboxEngine, item: str) -> Action:
    """Whether the library's resend would take ``item`` (a delivery or event id) now."""
    refusals = engine.sim.resend_refusals([item])
    if not refusals:
        return Action("resend", True)
    return Action("resend", False, "; ".join(dict.fromkeys(refusals.values())))


def time_left(delivery: Delivery, now: datetime) -> str:
    """The time left before the deadline, to the second once it is more than a minute; for a
    delivery that is over, what the deadline meant to it."""
    left = delivery.deadline_at - now
    if abs(left) > timedelta(minutes=1):
        left = timedelta(seconds=round(left.total_seconds()))
    if left < timedelta(0):
        return "passed " + format_duration(-left) + " ago"
    shown = format_duration(left)
    if delivery.state is State.DELIVERED:
        return f"{shown} (delivered: it no longer counts)"
    if delivery.reason is DeadLetterReason.DEADLINE_EXHAUSTED:
        return f"{shown}: too little for another attempt to end in time"
    if delivery.state is State.DEAD_LETTER:
        return f"{shown} (dead-lettered: a redrive sets a new one)"
    return shown


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
    """Resend (the library's eligibility) and redrive: possible now, or why not."""
    resend = resend_action(engine, delivery.delivery_id)
    if delivery.state in (State.SCHEDULED, State.LEASED):
        due = delivery.next_attempt_at
        owned = f"it is {delivery.state.value}: automatic processing owns it" + (
            f" (next attempt due {rfc3339(due)})" if due else ""
        )
        return (resend, Action("redrive", False, owned))
    if delivery.state is State.DEAD_LETTER:
        return (resend, Action("redrive", True))
    return (
        resend,
        Action("redrive", False, "only a dead letter can be redriven; it was delivered"),
    )


def _pretty(body: bytes) -> str:
    try:
        return json.dumps(json.loads(body), indent=2, ensure_ascii=False, sort_keys=False)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, nested past the stack
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
        endpoint_url=shown_url(delivery.destination_url),
    )


def row_dict(item: ListRow) -> dict[str, Any]:
    """One list row as JSON: the CLI's ``deliveries list --json`` row, and the last answer."""
    last = item.last
    return queries.row_json(item.row) | {
        "last_status": last.status if last else None,
        "last_classification": last.classification if last else None,
    }


@dataclass(frozen=True)
class EventView:
    """The event page: an event (event-only or not), its deliveries and the resend action."""

    event: Event
    deliveries: tuple[Delivery, ...]
    resend: Action
    body_pretty: str
    body_sha256: str

    @property
    def status(self) -> str:
        return self.event.status.value if self.event.status else "has deliveries"


def event_view(engine: SandboxEngine, event_id: str) -> EventView:
    """The event page's data (``NotFound`` for an unknown id)."""
    event = engine.sim.event(event_id)
    retained = engine.sim.store.event_deliveries(event.event_id)
    return EventView(
        event=event,
        deliveries=tuple(retained),
        resend=resend_action(engine, event.event_id),
        body_pretty=_pretty(event.body),
        body_sha256=hashlib.sha256(event.body).hexdigest(),
    )


def event_dict(view: EventView) -> dict[str, Any]:
    """The event page's data as JSON."""
    e = view.event
    return {
        "event_id": e.event_id,
        "event_type": e.type,
        "business_key": e.business_key,
        "status": e.status.value if e.status else None,
        "event_time": rfc3339(e.occurred_at),
        "body": e.body.decode("utf-8", "replace"),
        "deliveries": [d.delivery_id for d in view.deliveries],
        "actions": {"resend": {"possible": view.resend.possible, "why_not": view.resend.why_not}},
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
        "destination_url": shown_url(d.destination_url),
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
