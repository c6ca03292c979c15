"""Inspection and export: the delivery monitor's rows, their filters and the CSV export.

A :class:`Row` is either a **delivery** row (one retained delivery with its event) or an
**event-only** row (an event with no retained delivery: ``no_endpoint``, ``endpoint_disabled``,
``not_subscribed`` or ``history_unavailable``; it has no attempts). A :class:`RowFilter` narrows
them by event time, delivery time (the end of the last attempt), row kind, status (a delivery's
state or an event-only status), HTTP class of the last answer (``2xx`` … ``5xx``, or
``no_response`` for a timeout or a network failure), endpoint and business key; every field left
``None`` matches everything, the time bounds are inclusive.

:func:`export_csv` writes the filtered rows as CSV — the reconstructed callback data, never raw
signed bytes or response samples — and refuses, before writing anything, a selection of more than
:data:`EXPORT_LIMIT` rows (:class:`~sender_sim.exceptions.ExportTooLarge`): a partial file is
never a complete one.
"""

from __future__ import annotations

import csv
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from sender_sim.exceptions import ConfigurationError, ExportTooLarge
from sender_sim.records import (
    EVENT_ONLY_STATUSES,
    DeadLetterReason,
    Delivery,
    Event,
    EventStatus,
    State,
    from_us,
    rfc3339,
    to_us,
)
from sender_sim.store import SQLiteStore

__all__ = [
    "CSV_COLUMNS",
    "EXPORT_LIMIT",
    "HTTP_CLASSES",
    "Row",
    "RowFilter",
    "RowKind",
    "export_csv",
    "row_json",
    "rows",
]

EXPORT_LIMIT = 5000
"""The most rows one export may hold."""

HTTP_CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx", "no_response")
STATUSES = tuple(s.value for s in State) + EVENT_ONLY_STATUSES


class RowKind(enum.StrEnum):
    DELIVERY = "delivery"
    EVENT = "event"
    """An event-only row."""


@dataclass(frozen=True)
class RowFilter:
    """Which rows to show or export (every ``None`` field matches everything)."""

    event_from: datetime | None = None
    event_to: datetime | None = None
    delivered_from: datetime | None = None
    delivered_to: datetime | None = None
    kind: RowKind | str | None = None
    status: str | None = None
    http_class: str | None = None
    endpoint_id: str | None = None
    business_key: str | None = None

    def __post_init__(self) -> None:
        if self.kind is not None and self.kind not in tuple(RowKind):
            raise ConfigurationError(f"unknown row kind {self.kind!r}; choose delivery or event")
        if self.status is not None and self.status not in STATUSES:
            raise ConfigurationError(
                f"unknown status {self.status!r}; choose one of {', '.join(STATUSES)}"
            )
        if self.http_class is not None and self.http_class not in HTTP_CLASSES:
            raise ConfigurationError(
                f"unknown HTTP class {self.http_class!r}; choose one of {', '.join(HTTP_CLASSES)}"
            )


@dataclass(frozen=True)
class Row:
    """One monitor row: a delivery with its event, or an event-only event."""

    kind: RowKind
    event: Event
    delivery: Delivery | None
    status: str
    http_class: str | None
    endpoint_id: str | None
    business_key: str | None
    event_time: datetime
    delivery_time: datetime | None


_EVENT = (
    "e.event_id, e.type, e.business_key, e.occurred_us, e.body, e.digest, e.status, e.status_us,"
    " e.deadline_us"
)
_LAST = (
    "(SELECT {col} FROM attempts a WHERE a.delivery_id = d.delivery_id ORDER BY a.id DESC LIMIT 1)"
)
_CLASS = (
    "CASE WHEN last_kind IS NULL THEN NULL WHEN last_status IS NULL THEN 'no_response'"
    " ELSE CAST(last_status / 100 AS TEXT) || 'xx' END"
)


def _select(where: RowFilter) -> tuple[str, list[Any]]:
    """The rows' query (columns: kind, event…, delivery id, http class, delivery time)."""
    parts: list[str] = []
    params: list[Any] = []
    common: list[str] = []
    common_params: list[Any] = []
    if where.event_from is not None:
        common.append("e.occurred_us >= ?")
        common_params.append(to_us(where.event_from))
    if where.event_to is not None:
        common.append("e.occurred_us <= ?")
        common_params.append(to_us(where.event_to))
    if where.business_key is not None:
        common.append("e.business_key = ?")
        common_params.append(where.business_key)
    wants_delivery = where.kind in (None, RowKind.DELIVERY) and where.status not in (
        EVENT_ONLY_STATUSES
    )
    wants_event = (
        where.kind in (None, RowKind.EVENT)
        and where.endpoint_id is None
        and where.http_class is None
        and where.delivered_from is None
        and where.delivered_to is None
        and (where.status is None or where.status in EVENT_ONLY_STATUSES)
    )
    if wants_delivery:
        clauses = list(common)
        clause_params = list(common_params)
        if where.endpoint_id is not None:
            clauses.append("d.endpoint_id = ?")
            clause_params.append(where.endpoint_id)
        if where.status is not None:
            clauses.append("d.state = ?")
            clause_params.append(where.status)
        inner = (
            f"SELECT {_EVENT}, d.delivery_id, {_LAST.format(col='a.status')} AS last_status,"
            f" {_LAST.format(col='a.kind')} AS last_kind,"
            f" {_LAST.format(col='a.ended_us')} AS delivered_us,"
            " e.rowid AS event_seq, d.rowid AS delivery_seq"
            " FROM deliveries d JOIN events e ON e.event_id = d.event_id"
        )
        if clauses:
            inner += " WHERE " + " AND ".join(clauses)
        outer: list[str] = []
        if where.http_class is not None:
            outer.append(f"{_CLASS} = ?")
            clause_params.append(where.http_class)
        if where.delivered_from is not None:
            outer.append("delivered_us >= ?")
            clause_params.append(to_us(where.delivered_from))
        if where.delivered_to is not None:
            outer.append("delivered_us <= ?")
            clause_params.append(to_us(where.delivered_to))
        sql = "SELECT 'delivery', event_id, type, business_key, occurred_us, body, digest,"
        sql += " status, status_us, deadline_us, delivery_id,"
        sql += f" {_CLASS}, delivered_us, event_seq, delivery_seq FROM ({inner})"
        if outer:
            sql += " WHERE " + " AND ".join(outer)
        parts.append(sql)
        params.extend(clause_params)
    if wants_event:
        clauses = ["e.status IS NOT NULL", *common]
        clause_params = list(common_params)
        if where.status is not None:
            clauses.append("e.status = ?")
            clause_params.append(where.status)
        parts.append(
            f"SELECT 'event', {_EVENT}, NULL, NULL, NULL, e.rowid, NULL FROM events e WHERE "
            + " AND ".join(clauses)
        )
        params.extend(clause_params)
    if not parts:
        return "SELECT NULL WHERE 0", []
    return " UNION ALL ".join(parts), params


def count(store: SQLiteStore, where: RowFilter | None = None) -> int:
    """How many rows ``where`` selects."""
    sql, params = _select(where or RowFilter())
    return int(store.fetch(f"SELECT count(*) FROM ({sql})", params)[0][0])


def rows(store: SQLiteStore, where: RowFilter | None = None) -> list[Row]:
    """The rows ``where`` selects, by event time, then in the order they were stored (events
    published at the same instant, common under a virtual clock, keep their publication order;
    an event's deliveries keep theirs)."""
    sql, params = _select(where or RowFilter())
    found = store.fetch(f"SELECT * FROM ({sql}) ORDER BY 5, 14, 15", params)
    result: list[Row] = []
    for r in found:
        event = Event(
            r[1],
            r[2],
            r[3],
            from_us(r[4]),
            bytes(r[5]),
            r[6],
            EventStatus(r[7]) if r[7] else None,
            None if r[8] is None else from_us(r[8]),
            None if r[9] is None else from_us(r[9]),
        )
        delivery = None if r[10] is None else store.delivery(r[10])
        result.append(
            Row(
                kind=RowKind(r[0]),
                event=event,
                delivery=delivery,
                status=delivery.state.value if delivery else (event.status or ""),
                http_class=r[11],
                endpoint_id=delivery.endpoint_id if delivery else None,
                business_key=event.business_key,
                event_time=event.occurred_at,
                delivery_time=None if r[12] is None else from_us(r[12]),
            )
        )
    return result


def row_json(row: Row) -> dict[str, Any]:
    """One row as JSON (``hookproof deliveries list --json`` and the sandbox's API)."""
    d = row.delivery
    return {
        "kind": row.kind.value,
        "event_id": row.event.event_id,
        "event_type": row.event.type,
        "business_key": row.business_key,
        "event_time": rfc3339(row.event_time),
        "delivery_id": d.delivery_id if d else None,
        "endpoint_id": row.endpoint_id,
        "status": row.status,
        "reason": d.reason.value if d and d.reason else None,
        "http_class": row.http_class,
        "attempts": d.attempt if d else None,
        "delivery_time": rfc3339(row.delivery_time) if row.delivery_time else None,
    }


CSV_COLUMNS = (
    "kind",
    "event_id",
    "event_type",
    "business_key",
    "event_time",
    "delivery_id",
    "endpoint_id",
    "status",
    "reason",
    "http_class",
    "attempts",
    "delivery_time",
    "data",
)


def _reason(delivery: Delivery | None) -> DeadLetterReason | None:
    return None if delivery is None else delivery.reason


def _csv_row(row: Row) -> Sequence[str]:
    d = row.delivery
    reason = _reason(d)
    return (
        row.kind.value,
        row.event.event_id,
        row.event.type,
        row.business_key or "",
        rfc3339(row.event_time),
        d.delivery_id if d else "",
        row.endpoint_id or "",
        row.status,
        reason.value if reason else "",
        row.http_class or "",
        str(d.attempt) if d else "",
        rfc3339(row.delivery_time) if row.delivery_time else "",
        row.event.body.decode("utf-8", "replace"),
    )


def export_csv(store: SQLiteStore, where: RowFilter | None, out: TextIO) -> int:
    """Write the rows ``where`` selects to ``out`` as CSV (a header, then one line per row);
    how many rows. More than :data:`EXPORT_LIMIT` is refused before anything is written."""
    selected = count(store, where)
    if selected > EXPORT_LIMIT:
        raise ExportTooLarge(selected, EXPORT_LIMIT)
    chosen = rows(store, where)
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    writer.writerows(_csv_row(r) for r in chosen)
    return len(chosen)
