"""How the sender commands report a delivery: its JSON document, its ledger rows as JSON, its last
outcome and its verdict in words, and the live progress line of each new ledger row."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from receiver.redaction import shown_url
from sender_sim.commands.support import RowSink, describe_row, progress_line
from sender_sim.records import Delivery, LedgerRow, State, rfc3339
from sender_sim.simulator import Simulator

__all__ = [
    "delivery_json",
    "last_outcome",
    "last_seq",
    "queued_result",
    "row_json",
    "row_printer",
    "verdict",
]


def row_json(row: LedgerRow) -> dict[str, Any]:
    """One ledger row as JSON, with its plain-words text."""
    return {
        "seq": row.seq,
        "at": rfc3339(row.at),
        "from": row.from_state.value if row.from_state else None,
        "to": row.to_state.value if row.to_state else None,
        "actor": row.actor,
        "cause": row.cause,
        "reason": row.reason.value if row.reason else None,
        "text": describe_row(row),
    }


def delivery_json(sim: Simulator, delivery: Delivery) -> dict[str, Any]:
    """One delivery as JSON: ids, destination, state, budget and last outcome."""
    return {
        "delivery_id": delivery.delivery_id,
        "event_id": delivery.event_id,
        "endpoint_id": delivery.endpoint_id,
        "url": shown_url(delivery.destination_url),
        "business_key": delivery.business_key,
        "state": delivery.state.value,
        "reason": delivery.reason.value if delivery.reason else None,
        "attempts": delivery.attempt,
        "max_attempts": delivery.max_attempts,
        "redrives": delivery.redrives,
        "deadline_at": rfc3339(delivery.deadline_at),
        "last_outcome": last_outcome(sim, delivery),
    }


def last_outcome(sim: Simulator, delivery: Delivery) -> str:
    """``HTTP 410 gone``, ``timeout ambiguous`` or ``(no attempt)``."""
    attempts = sim.attempts(delivery.delivery_id)
    if not attempts:
        return "(no attempt)" if delivery.last_outcome is None else delivery.last_outcome
    last = attempts[-1]
    answer = f"HTTP {last.status}" if last.status is not None else last.kind.value
    return f"{answer} {last.classification}"


def verdict(delivery: Delivery) -> str:
    """``delivered after 2 attempt(s)`` or ``dead letter (reason) after 1 attempt(s)``."""
    if delivery.state is State.DELIVERED:
        return f"delivered after {delivery.attempt} attempt(s)"
    reason = delivery.reason.value if delivery.reason else "?"
    return f"dead letter ({reason}) after {delivery.attempt} attempt(s)"


def row_printer(console: Console) -> RowSink:
    """A row sink printing each new ledger row's progress line on ``console``."""

    def echo(row: LedgerRow) -> None:
        console.print(progress_line(row))

    return echo


def last_seq(sim: Simulator, delivery_id: str) -> int:
    """The delivery's last ledger row so far (rows after it are what a run reports)."""
    rows = sim.ledger(delivery_id)
    return rows[-1].seq if rows else 0


def queued_result(
    out: Console, finals: list[Delivery], *, queue_only: bool, end_note: str | None
) -> int:
    """Print what became of deliveries a redrive or resend queued; the command's exit status
    (0 queued only, or every one delivered; else 1)."""
    out.print("Result:")
    for d in finals:
        status = "queued (not sent: --queue-only)" if queue_only else verdict(d)
        out.print(f"  {d.delivery_id}  {status}")
    if end_note:
        out.print(end_note)
    if queue_only:
        return 0
    return 0 if all(d.state is State.DELIVERED for d in finals) else 1
