"""The ONE place the sandbox asks the simulator for rows, CSV exports and resends.

Issue 11 gives :class:`~sender_sim.simulator.Simulator` ``rows(where)``, ``export_csv(where, out)``,
``resend(ids, *, actor)`` (raising ``ResendRefused``), ``RowFilter`` and ``ExportTooLarge``. Until
that lands, this module implements the same shapes on today's library:

- :func:`rows` filters ``sim.deliveries(...)`` and each delivery's attempts in Python;
- :func:`export_csv` writes the filtered rows with :mod:`csv`, refusing more than
  :data:`EXPORT_LIMIT` rows with :class:`ExportTooLarge` (``code`` ``EXPORT_TOO_LARGE``; nothing is
  written);
- :func:`resend` is atomic over 1–100 deliveries: anything scheduled or in flight (or on a disabled
  endpoint) refuses the whole batch with :class:`ResendRefused` (``code``
  ``WEBHOOK_DELIVERY_NOT_REPLAYABLE``, ``ineligible`` naming each one); a delivered or dead-letter
  delivery gets a NEW delivery of the SAME event (same event id and exact body bytes, so the
  receiver sees the same ``webhook-id`` and must deduplicate), to the same endpoint, published in
  one transaction, whose attempts are real sends.

SWITCH (the lead, after issue 11 is merged): replace the bodies below by the ``Simulator`` methods
and re-export its ``RowFilter``/``Row``/``ResendResult``/``ResendRefused``/``ExportTooLarge``; no
other sandbox module touches these calls.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import TextIO

from sender_sim.exceptions import ConfigurationError, NotFound, SimulatorError
from sender_sim.records import Attempt, Delivery, Event, LedgerRow, State, rfc3339
from sender_sim.simulator import Publication, Simulator
from sender_sim.store import DeliveryFilter

__all__ = [
    "EXPORT_LIMIT",
    "HTTP_CLASSES",
    "NOT_REPLAYABLE",
    "RESEND_LIMIT",
    "TOO_LARGE",
    "ExportTooLarge",
    "ResendRefused",
    "ResendResult",
    "Row",
    "RowFilter",
    "endpoint_problem",
    "export_csv",
    "http_class",
    "resend",
    "rows",
]

EXPORT_LIMIT = 5000
"""A CSV export holds at most this many rows; a larger selection is refused, never truncated."""
RESEND_LIMIT = 100
"""A resend queues 1 to this many deliveries, all or none."""
NOT_REPLAYABLE = "WEBHOOK_DELIVERY_NOT_REPLAYABLE"
TOO_LARGE = "EXPORT_TOO_LARGE"
HTTP_CLASSES: tuple[str, ...] = ("2xx", "3xx", "4xx", "5xx", "transport", "none")
"""The last attempt's answer: an HTTP status class, a transport failure, or no attempt yet."""
_LIVE = (State.SCHEDULED, State.LEASED)


class ResendRefused(SimulatorError):
    """Nothing was queued: ``ineligible`` maps each ineligible delivery id to why."""

    code = NOT_REPLAYABLE

    def __init__(self, ineligible: dict[str, str]) -> None:
        self.ineligible = dict(ineligible)
        listed = "; ".join(f"{k}: {v}" for k, v in self.ineligible.items())
        super().__init__(f"{NOT_REPLAYABLE}: nothing queued; {listed}")


class ExportTooLarge(SimulatorError):
    """The filtered view has more than :data:`EXPORT_LIMIT` rows; nothing was exported."""

    code = TOO_LARGE

    def __init__(self, count: int, limit: int = EXPORT_LIMIT) -> None:
        self.count = count
        self.limit = limit
        super().__init__(
            f"{TOO_LARGE}: {count} rows match, the export holds at most {limit}; narrow the filters"
        )


@dataclass(frozen=True)
class RowFilter:
    """Which rows to list or export; every field given must match (times are inclusive)."""

    event_from: datetime | None = None
    event_to: datetime | None = None
    delivered_from: datetime | None = None
    delivered_to: datetime | None = None
    kind: str | None = None
    status: str | None = None
    http_class: str | None = None
    endpoint_id: str | None = None
    business_key: str | None = None

    def __post_init__(self) -> None:
        if self.status is not None and self.status not in set(State):
            raise ConfigurationError(
                f"unknown status {self.status!r}; choose one of {', '.join(State)}"
            )
        if self.http_class is not None and self.http_class not in HTTP_CLASSES:
            raise ConfigurationError(
                f"unknown HTTP class {self.http_class!r}; choose one of {', '.join(HTTP_CLASSES)}"
            )
        if self.kind is not None and self.kind != "delivery":
            raise ConfigurationError(f"unknown row kind {self.kind!r}; the sandbox has 'delivery'")


@dataclass(frozen=True)
class Row:
    """One delivery with its event and its last attempt (``None``: not attempted yet)."""

    delivery: Delivery
    event: Event
    last: Attempt | None
    attempts: int

    @property
    def kind(self) -> str:
        return "delivery"

    @property
    def http_class(self) -> str:
        return http_class(self.last)

    @property
    def delivered_at(self) -> datetime | None:
        """When the last attempt started (the row's delivery time)."""
        return self.last.started_at if self.last is not None else None


@dataclass(frozen=True)
class ResendResult:
    """A queued resend: ``delivery_ids[i]`` is the new delivery of ``sources[i]``'s event."""

    sources: tuple[str, ...]
    delivery_ids: tuple[str, ...]
    actor: str


def http_class(attempt: Attempt | None) -> str:
    if attempt is None:
        return "none"
    if attempt.status is None:
        return "transport"
    return f"{attempt.status // 100}xx"


def _within(value: datetime | None, low: datetime | None, high: datetime | None) -> bool:
    if low is None and high is None:
        return True
    if value is None:
        return False
    return (low is None or value >= low) and (high is None or value <= high)


def _publication_order(
    sim: Simulator, found: Sequence[Delivery]
) -> Callable[[Delivery], tuple[datetime, int, str]]:
    """Creation time, then (for deliveries created at the same instant, common under a virtual
    clock) the sequence number of their first ledger row: the order they were published in."""
    times = Counter(d.created_at for d in found)

    def key(d: Delivery) -> tuple[datetime, int, str]:
        if times[d.created_at] == 1:
            return (d.created_at, 0, d.delivery_id)
        first = sim.ledger(d.delivery_id)
        return (d.created_at, first[0].seq if first else 0, d.delivery_id)

    return key


def rows(sim: Simulator, where: RowFilter | None = None, *, limit: int | None = None) -> list[Row]:
    """The rows matching ``where``, newest first (at most ``limit``)."""
    f = where or RowFilter()
    state = State(f.status) if f.status else None
    found = sim.deliveries(
        DeliveryFilter(state=state, endpoint_id=f.endpoint_id, business_key=f.business_key)
    )
    found.sort(key=_publication_order(sim, found), reverse=True)
    out: list[Row] = []
    for delivery in found:
        event = sim.event(delivery.event_id)
        if not _within(event.occurred_at, f.event_from, f.event_to):
            continue
        attempts = sim.attempts(delivery.delivery_id)
        row = Row(delivery, event, attempts[-1] if attempts else None, len(attempts))
        if f.http_class is not None and row.http_class != f.http_class:
            continue
        if not _within(row.delivered_at, f.delivered_from, f.delivered_to):
            continue
        out.append(row)
        if limit is not None and len(out) >= limit:
            break
    return out


CSV_COLUMNS: tuple[str, ...] = (
    "kind",
    "delivery_id",
    "event_id",
    "event_type",
    "business_key",
    "endpoint_id",
    "status",
    "reason",
    "attempts",
    "http_class",
    "last_status",
    "event_at",
    "delivered_at",
    "deadline_at",
)


def _csv_record(row: Row) -> tuple[str, ...]:
    d = row.delivery
    last = row.last
    return (
        row.kind,
        d.delivery_id,
        d.event_id,
        row.event.type,
        d.business_key or "",
        d.endpoint_id,
        d.state.value,
        d.reason.value if d.reason else "",
        str(row.attempts),
        row.http_class,
        str(last.status) if last is not None and last.status is not None else "",
        rfc3339(row.event.occurred_at),
        rfc3339(row.delivered_at) if row.delivered_at else "",
        rfc3339(d.deadline_at),
    )


def export_csv(sim: Simulator, where: RowFilter | None, out: TextIO) -> int:
    """Write the filtered rows as CSV (header first) and return how many; more than
    :data:`EXPORT_LIMIT` raises :class:`ExportTooLarge` before anything is written."""
    selected = rows(sim, where, limit=EXPORT_LIMIT + 1)
    if len(selected) > EXPORT_LIMIT:
        total = len(rows(sim, where))
        raise ExportTooLarge(total, EXPORT_LIMIT)
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows(_csv_record(r) for r in selected)
    return len(selected)


def endpoint_problem(sim: Simulator, endpoint_id: str) -> str | None:
    """Why nothing can be sent to ``endpoint_id`` now (``None``: it is configured and active)."""
    try:
        active = sim.endpoint_config(endpoint_id).endpoint.active
    except NotFound:
        return f"endpoint {endpoint_id} is not configured in this sandbox"
    return None if active else f"endpoint {endpoint_id} is disabled"


def _why_not(sim: Simulator, delivery: Delivery) -> str | None:
    if delivery.state in _LIVE:
        return f"it is {delivery.state.value}: automatic processing owns it"
    return endpoint_problem(sim, delivery.endpoint_id)


def resend(
    sim: Simulator, ids: Sequence[str], *, actor: str, deadline_at: datetime
) -> ResendResult:
    """Queue a new real delivery of each delivery's event, all or none (see the module
    docstring). ``ConfigurationError`` for no actor or a batch outside 1–100."""
    wanted = list(dict.fromkeys(i.strip() for i in ids if i.strip()))
    if not actor.strip():
        raise ConfigurationError("a resend needs an actor (who asks for it)")
    if not 1 <= len(wanted) <= RESEND_LIMIT:
        raise ConfigurationError(
            f"a resend takes 1 to {RESEND_LIMIT} deliveries, not {len(wanted)}"
        )
    found = {d.delivery_id: d for d in sim.deliveries(DeliveryFilter(delivery_ids=tuple(wanted)))}
    ineligible: dict[str, str] = {}
    for did in wanted:
        delivery = found.get(did)
        why = "no such delivery" if delivery is None else _why_not(sim, delivery)
        if why is not None:
            ineligible[did] = why
    if ineligible:
        raise ResendRefused(ineligible)
    publications = []
    for did in wanted:
        d = found[did]
        event = sim.event(d.event_id)
        publications.append(
            Publication(
                endpoint_id=d.endpoint_id,
                deadline_at=deadline_at,
                event_type=event.type,
                business_key=event.business_key,
                event_id=event.event_id,
                occurred_at=event.occurred_at,
                body=event.body,
            )
        )
    new_ids = sim.publish_many(publications)
    now = sim.now()
    sim.store.note(
        [
            LedgerRow(
                did, now, None, None, actor.strip(), "resend", None, {"source": src, "to": did}
            )
            for src, did in zip(wanted, new_ids, strict=True)
        ]
        + [
            LedgerRow(src, now, None, None, actor.strip(), "resent", None, {"as": did})
            for src, did in zip(wanted, new_ids, strict=True)
        ]
    )
    return ResendResult(tuple(wanted), tuple(new_ids), actor.strip())


def filter_fields() -> tuple[str, ...]:
    """The names of :class:`RowFilter`'s fields (the query parameters of the list and export)."""
    return tuple(f.name for f in fields(RowFilter))
