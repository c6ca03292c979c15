"""What the ``hookproof`` sender commands and the sandbox share: option parsing (secrets, durations,
deadlines, ``key=value`` fields), opening the store and choosing the session clock, one-line
descriptions of ledger rows, and a runner that drives chosen deliveries to the end.

**Clocks across commands.** The store keeps simulation times. Under virtual time (the default) the
session clock starts at ``max(real now, the latest time recorded in the store)``, so a command
run after a six-hour virtual schedule never sees time go backwards; waits then take no wall time.
Signatures are always stamped by the real wire clock. Under real time both clocks are the system
clock.

A command that moves the simulated clock past real time says so when it ends
(:func:`clock_end_note`), and the next command on the same database says which simulated time it
starts from (:func:`clock_start_note`), so a ``--deadline +1h`` is never an hour from a clock the
user cannot see.

**Scoped running.** :func:`run_deliveries` claims only the deliveries it is given (through
``Worker.claim(delivery_ids=…)``), never whatever else is due in a shared database (those may
belong to endpoints whose secrets this process does not hold). When none of them is due it jumps
the virtual clock to the next due time, or waits for it under real time. Every new ledger row is
handed to ``on_row`` as soon as it is written, so callers print live progress.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import click
import httpx
from rich.console import Console

from receiver.durations import parse_duration as parse_any_duration
from receiver.redaction import shown_url
from sender_sim.clock import Clock, RealClock, VirtualClock
from sender_sim.exceptions import ConfigurationError, StoreError
from sender_sim.explain import SENTENCES
from sender_sim.records import LedgerRow, State, format_duration, from_us, rfc3339
from sender_sim.sender_client import sender_client
from sender_sim.simulator import Simulator
from sender_sim.store import SQLiteStore
from sender_sim.urls import url_problem
from sender_sim.worker import Worker

__all__ = [
    "DEFAULT_DB",
    "RowSink",
    "announce_start",
    "clock_end_note",
    "clock_start_note",
    "delivery_client",
    "describe_row",
    "emit_new_rows",
    "next_due",
    "open_store",
    "parse_deadline",
    "parse_duration",
    "parse_fields",
    "progress_line",
    "run_deliveries",
    "sending_secrets",
    "session_clock",
    "step_deliveries",
    "store_time",
    "transition_text",
    "unsettled",
]

DEFAULT_DB = "hookproof-sender.sqlite"
"""The sender database every command uses unless ``--db`` says otherwise (current folder)."""

RowSink = Callable[[LedgerRow], None]

_SETTLED = (State.DELIVERED, State.DEAD_LETTER)


@asynccontextmanager
async def delivery_client() -> AsyncIterator[httpx.AsyncClient]:
    """The HTTP client a command delivers through, with its lazy set-up done before anything is
    due. httpcore sets up its async backend (imports anyio's) on the first request: about 45 ms
    of CPU here, half a second on a machine busy starting other processes. Done inside attempt
    1, that makes attempt 1 late, and since each retry is due a delay after the previous
    attempt's *due* time, the retry then looks early from outside (check-sender's demo failed
    ``sender.*`` delays that way)."""
    async with sender_client() as client:
        anyio.Event()  # what httpcore's first request would set up
        yield client


def check_url(url: str, what: str = "URL") -> None:
    """A usage error naming ``what`` unless ``url`` can address a webhook endpoint
    (:mod:`sender_sim.urls`)."""
    problem = url_problem(url)
    if problem is not None:
        raise click.UsageError(f"{what} {shown_url(url)!r} cannot be used: {problem}")


def sending_secrets(values: Iterable[str], *, queue_only: bool, what: str) -> tuple[str, ...]:
    """The secrets to send ``what`` with; none is a usage error unless ``--queue-only``."""
    keys = tuple(values)
    if not queue_only and not keys:
        raise click.UsageError(
            f"sending the {what} needs --secret (or HOOKPROOF_SECRET); "
            "pass --queue-only to only queue them"
        )
    return keys


def parse_duration(text: str) -> timedelta:
    """A signed offset (:func:`receiver.durations.parse_duration`: ``90s``, ``+2h``, ``-5m``,
    ``1h30m``, ``0.000001s``; a bare number is refused: seconds or a date?)."""
    try:
        return parse_any_duration(text, bare_seconds=False, signed=True)
    except ValueError as error:
        raise ConfigurationError(str(error)) from None


def parse_deadline(text: str, now: datetime, *, option: str = "--deadline") -> datetime:
    """An RFC 3339 time with a timezone (``2026-08-13T10:00:00Z``) or a duration from ``now``
    (``+30m``, ``2h``)."""
    raw = text.strip()
    if raw and (raw[0] in "+-" or raw[0].isdigit()):
        try:
            return now + parse_duration(raw)
        except ConfigurationError:
            pass
    try:
        parsed = datetime.fromisoformat(raw.replace("z", "Z"))
    except ValueError:
        raise ConfigurationError(
            f"{option} {text!r} is neither an RFC 3339 time (2026-08-13T10:00:00Z) "
            "nor a duration from now (+30m, 2h)"
        ) from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise ConfigurationError(
            f"{option} {text!r} has no timezone; add Z or an offset such as +02:00"
        )
    return parsed.astimezone(UTC)


def parse_fields(items: Sequence[str]) -> dict[str, Any]:
    """``key=value`` pairs; a value that parses as JSON (``42``, ``true``, ``{"a":1}``) is used as
    such, anything else is a string."""
    fields: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ConfigurationError(f"{item!r} is not key=value")
        try:
            fields[key.strip()] = json.loads(value)
        except (ValueError, RecursionError):  # not JSON (or nested past the stack): a string
            fields[key.strip()] = value
    return fields


def open_store(path: str, *, must_exist: bool = False) -> SQLiteStore:
    """The sender database at ``path``; with ``must_exist``, a missing file is a one-line error
    (read-only commands should not create an empty database by accident)."""
    if path != ":memory:":
        location = Path(path)
        if location.is_dir():
            raise StoreError(f"--db {path} is a folder, not a database file")
        if must_exist and not location.exists():
            raise StoreError(
                f"no sender database at {path} (run `hookproof send` first, or pass --db PATH)"
            )
        parent = location.resolve().parent
        if not parent.is_dir():
            raise StoreError(f"cannot open the sender database {path}: {parent} does not exist")
        if not os.access(parent, os.W_OK):
            raise StoreError(f"cannot open the sender database {path}: {parent} is not writable")
    return SQLiteStore(path)


def store_time(store: SQLiteStore) -> datetime | None:
    """The latest time recorded in the store's ledger (``None`` for an empty store)."""
    latest = store.counts("SELECT 'latest', max(at_us) FROM ledger HAVING count(*) > 0")
    value = latest.get("latest")
    return None if value is None else from_us(value)


def session_clock(store: SQLiteStore, *, virtual: bool) -> Clock:
    """The simulation clock of one command (see the module docstring)."""
    if not virtual:
        return RealClock()
    now = datetime.now(UTC)
    latest = store_time(store)
    return VirtualClock(max(now, latest) if latest is not None else now)


_NOTICEABLE = timedelta(seconds=1)
"""How far simulated time must run ahead of real time (or move) before a command says so."""


def clock_start_note(clock: Clock) -> str | None:
    """The line saying a virtual session clock starts ahead of real time (else ``None``)."""
    if not isinstance(clock, VirtualClock):
        return None
    now = clock.now()
    ahead = now - datetime.now(UTC)
    if ahead < _NOTICEABLE:
        return None
    return (
        f"Simulated time starts at {rfc3339(now)}, {format_duration(ahead)} ahead of real time "
        "(an earlier command on this database advanced it); relative times such as +1h count "
        "from it."
    )


def announce_start(sim: Simulator, out: Console, *, as_json: bool) -> datetime:
    """The simulated moment a command starts at; the line of :func:`clock_start_note` printed
    first when there is one (not in JSON output)."""
    started = sim.now()
    note = clock_start_note(sim.clock)
    if note and not as_json:
        out.print(note)
    return started


def clock_end_note(clock: Clock, started: datetime) -> str | None:
    """The line saying this command advanced the database's simulated clock (else ``None``)."""
    if not isinstance(clock, VirtualClock):
        return None
    now = clock.now()
    if now - started < _NOTICEABLE:
        return None
    ahead = now - datetime.now(UTC)
    where = f", {format_duration(ahead)} ahead of real time" if ahead >= _NOTICEABLE else ""
    return (
        f"This command advanced the simulated clock by {format_duration(now - started)} to "
        f"{rfc3339(now)}{where}; the next command on this database starts from there."
    )


def _fault_text(details: Mapping[str, Any]) -> str:
    fault = details.get("fault", {})
    kind = fault.get("kind", "?") if isinstance(fault, dict) else "?"
    text = f"FAULT injected: {kind}"
    if "attempt" in details:
        text += f" on attempt {details['attempt']}"
    if details.get("status") not in (None, ""):
        text += f" (the receiver's answer was {details['status']})"
    return text


def describe_row(row: LedgerRow) -> str:
    """One ledger row in the same plain words as ``hookproof explain``."""
    if row.cause.startswith("fault:"):
        return _fault_text(row.details)
    sentence = SENTENCES.get(row.cause)
    if sentence is None:
        return f"{row.cause}: {json.dumps(dict(row.details), sort_keys=True, default=str)}"
    return sentence(row, row.details)


def transition_text(row: LedgerRow) -> str:
    """``scheduled -> leased``, ``(new) -> scheduled`` or ``note`` for a row that moved nothing."""
    if row.to_state is None:
        return "note"
    before = row.from_state.value if row.from_state is not None else "(new)"
    return f"{before} -> {row.to_state.value}"


def progress_line(row: LedgerRow) -> str:
    """A live progress line: time, delivery, transition, plain words."""
    return f"{rfc3339(row.at)}  {row.delivery_id}  {transition_text(row):<26} {describe_row(row)}"


async def emit_new_rows(
    sim: Simulator, ids: Sequence[str], seen: dict[str, int], sink: RowSink
) -> None:
    """Hand ``sink`` every ledger row of ``ids`` newer than ``seen`` (updated in place)."""
    for delivery_id in ids:
        rows = await asyncio.to_thread(sim.ledger, delivery_id)
        last = seen.get(delivery_id, 0)
        for row in rows:
            if row.seq > last:
                sink(row)
                last = row.seq
        seen[delivery_id] = last


def _due(sim: Simulator, delivery_id: str) -> datetime | None:
    delivery = sim.delivery(delivery_id)
    if delivery.state is State.SCHEDULED:
        return delivery.next_attempt_at
    if delivery.state is State.LEASED:
        return delivery.lease_expires_at
    return None


def unsettled(sim: Simulator, delivery_ids: Iterable[str]) -> list[str]:
    """The given deliveries that are neither delivered nor dead letters."""
    return [i for i in delivery_ids if sim.delivery(i).state not in _SETTLED]


def next_due(sim: Simulator, delivery_ids: Iterable[str]) -> datetime | None:
    """When the first of these deliveries can next be claimed (``None``: none ever will)."""
    dues = [d for d in (_due(sim, i) for i in delivery_ids) if d is not None]
    return min(dues) if dues else None


async def step_deliveries(
    sim: Simulator,
    delivery_ids: Sequence[str],
    *,
    on_row: RowSink | None = None,
    worker: Worker | None = None,
    seen: dict[str, int] | None = None,
) -> int:
    """One round over the given deliveries: claim those due now, send, persist; report the new
    ledger rows. Returns how many attempts were sent (0: nothing was due)."""
    chosen = worker if worker is not None else sim.default_worker
    sink: RowSink = on_row if on_row is not None else (lambda row: None)
    reported = seen if seen is not None else {}
    ids = list(delivery_ids)
    if not ids:
        return 0
    leases = await asyncio.to_thread(chosen.claim, len(ids), delivery_ids=ids)
    await emit_new_rows(sim, ids, reported, sink)
    if not leases:
        return 0
    sent = list(await asyncio.gather(*(chosen.send(lease) for lease in leases)))
    await asyncio.to_thread(chosen.complete, sent)
    await emit_new_rows(sim, ids, reported, sink)
    return len(sent)


async def run_deliveries(
    sim: Simulator,
    delivery_ids: Sequence[str],
    *,
    on_row: RowSink | None = None,
    worker: Worker | None = None,
    seen: dict[str, int] | None = None,
    max_passes: int = 100_000,
) -> None:
    """Run the given deliveries until each is delivered or a dead letter (see the docstring).

    ``seen`` maps delivery ids to the last ledger ``seq`` already reported (updated in place);
    rows at or below it are not reported again.
    """
    chosen = worker if worker is not None else sim.default_worker
    sink: RowSink = on_row if on_row is not None else (lambda row: None)
    reported = seen if seen is not None else {}
    await emit_new_rows(sim, list(delivery_ids), reported, sink)
    for _ in range(max_passes):
        pending = unsettled(sim, delivery_ids)
        if not pending:
            return
        if await step_deliveries(sim, pending, on_row=sink, worker=chosen, seen=reported):
            continue
        pending = unsettled(sim, pending)
        due = next_due(sim, pending)
        if due is None:
            return
        lag = chosen.now() - sim.now()
        target = due - lag
        now = sim.now()
        if isinstance(sim.clock, VirtualClock):
            sim.clock.set(max(target, now + timedelta(microseconds=1)))
        else:
            wait = min(max(target - now, timedelta(milliseconds=1)), timedelta(seconds=1))
            await asyncio.sleep(wait.total_seconds())  # real-time: the real clock must reach it
    raise ConfigurationError(f"the deliveries did not settle within {max_passes} passes")
