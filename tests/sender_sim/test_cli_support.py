"""The sender CLI's shared parts: durations, deadlines, ``key=value`` fields, store opening, the
session clock, row descriptions; and a scripted loopback receiver the CLI and sandbox tests use.

:class:`ScriptedReceiver` is a tiny Starlette app served over real HTTP on 127.0.0.1 (uvicorn in a
thread, via :func:`receiver.server.running_server`). It answers with a scripted list of statuses
(the last one repeats), records every request it got, and verifies signatures with the real
:class:`~receiver.signing.Verifier`, so a test sees exactly what went over the wire.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from receiver.exceptions import ReceiverError
from receiver.server import running_server
from receiver.signing import Secret, Verifier, scheme_named
from sender_sim import FaultPlan, Simulator, SQLiteStore, VirtualClock
from sender_sim.commands.support import (
    describe_row,
    open_store,
    parse_deadline,
    parse_duration,
    parse_fields,
    run_deliveries,
    session_clock,
    store_time,
    transition_text,
)
from sender_sim.exceptions import ConfigurationError, StoreError
from sender_sim.records import LedgerRow, State

SECRET = "whsec_" + base64.b64encode(bytes(range(32))).decode()
OTHER_SECRET = "whsec_" + base64.b64encode(bytes(range(32, 64))).decode()
NOW = datetime(2026, 8, 13, 9, 0, tzinfo=UTC)


@dataclass
class Received:
    body: bytes
    headers: dict[str, str]
    verified: bool


@dataclass
class ScriptedReceiver:
    """Answers ``statuses`` in order (the last repeats); records every request."""

    statuses: list[int] = field(default_factory=lambda: [200])
    secret: str = SECRET
    scheme: str = "standard"
    received: list[Received] = field(default_factory=list)
    url: str = ""

    def app(self) -> Starlette:
        verifier = Verifier([Secret(self.secret)], scheme=scheme_named(self.scheme))

        async def hook(request: Request) -> Response:
            body = await request.body()
            headers = {k.lower(): v for k, v in request.headers.items()}
            try:
                verifier.verify(body, headers)
                verified = True
            except ReceiverError:
                verified = False
            self.received.append(Received(body, headers, verified))
            index = min(len(self.received) - 1, len(self.statuses) - 1)
            status = self.statuses[index]
            if not verified:
                status = 401
            return JSONResponse({"status": status}, status_code=status)

        return Starlette(routes=[Route("/webhooks", hook, methods=["POST"])])


@contextlib.contextmanager
def scripted(
    *statuses: int, secret: str = SECRET, scheme: str = "standard"
) -> Iterator[ScriptedReceiver]:
    """A :class:`ScriptedReceiver` listening on a free loopback port (``.url`` is set)."""
    receiver = ScriptedReceiver(list(statuses) or [200], secret, scheme)
    with running_server(receiver.app()) as base:
        receiver.url = base + "/webhooks"
        yield receiver


# -- durations and deadlines -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        ("+2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("0.000001s", timedelta(microseconds=1)),
        ("-5m", timedelta(minutes=-5)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "5", "m", "1x", "1h 30m", "1.5h30m", "+", "s30", "30m1h"])
def test_bad_durations_say_what_is_expected(text: str) -> None:
    with pytest.raises(ConfigurationError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("+30m", NOW + timedelta(minutes=30)),
        ("2h", NOW + timedelta(hours=2)),
        ("2026-08-13T10:00:00Z", datetime(2026, 8, 13, 10, tzinfo=UTC)),
        ("2026-08-13T12:00:00.000001+02:00", datetime(2026, 8, 13, 10, 0, 0, 1, tzinfo=UTC)),
    ],
)
def test_deadlines(text: str, expected: datetime) -> None:
    parsed = parse_deadline(text, NOW)
    assert parsed == expected
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2026-08-13T10:00:00", "no timezone"),
        ("tomorrow", "neither an RFC 3339 time"),
        ("", "neither"),
        ("+30x", "neither"),
    ],
)
def test_bad_deadlines(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_deadline(text, NOW)


def test_fields_parse_json_values_and_keep_strings() -> None:
    assert parse_fields(["a=1", "b=true", 'c={"x": 2}', "d=ren_1", "e="]) == {
        "a": 1,
        "b": True,
        "c": {"x": 2},
        "d": "ren_1",
        "e": "",
    }
    with pytest.raises(ConfigurationError, match="key=value"):
        parse_fields(["novalue"])


# -- store and clock ---------------------------------------------------------------------------


def test_read_only_commands_do_not_create_a_database(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no sender database"):
        open_store(str(tmp_path / "missing.sqlite"), must_exist=True)
    assert not (tmp_path / "missing.sqlite").exists()
    with pytest.raises(StoreError, match="does not exist"):
        open_store(str(tmp_path / "no" / "such" / "dir.sqlite"))
    with pytest.raises(StoreError, match="folder"):
        open_store(str(tmp_path))


def test_the_virtual_clock_never_goes_back_across_commands(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "s.sqlite"))
    try:
        assert store_time(store) is None
        assert isinstance(session_clock(store, virtual=False).now(), datetime)
        later = datetime.now(UTC) + timedelta(hours=7)
        store.note([LedgerRow("del_x", later, None, None, "test", "note")])
        assert store_time(store) == later.replace(microsecond=later.microsecond)
        clock = session_clock(store, virtual=True)
        assert isinstance(clock, VirtualClock)
        assert clock.now() == later
    finally:
        store.close()


def test_rows_are_described_in_explain_words() -> None:
    row = LedgerRow(
        "del_1",
        NOW,
        State.SCHEDULED,
        State.LEASED,
        "worker-1",
        "leased",
        details={"worker": "worker-1", "token": 3, "attempt": 2},
    )
    assert "leased to worker-1 (fencing token 3" in describe_row(row)
    assert transition_text(row) == "scheduled -> leased"
    fault = LedgerRow(
        "del_1",
        NOW,
        None,
        None,
        "fault-injector",
        "fault:crash_after_send",
        details={"fault": {"kind": "crash_after_send"}, "attempt": 1, "status": 200},
    )
    assert describe_row(fault) == (
        "FAULT injected: crash_after_send on attempt 1 (the receiver's answer was 200)"
    )
    assert transition_text(fault) == "note"
    unknown = LedgerRow("del_1", NOW, None, None, "x", "mystery", details={"k": 1})
    assert describe_row(unknown) == 'mystery: {"k": 1}'


# -- the scoped runner -------------------------------------------------------------------------


async def _run_reporting(receiver: ScriptedReceiver, faults: list[str]) -> list[tuple[str, int]]:
    """Run one delivery; for each reported row, its cause and how many requests had arrived."""
    async with httpx.AsyncClient() as client:
        sim = Simulator(
            SQLiteStore(":memory:"),
            clock=VirtualClock(NOW),
            client=client,
            faults=FaultPlan.parse(faults),
        )
        sim.add_endpoint("e", receiver.url, [SECRET])
        other = sim.publish(endpoint_id="e", deadline_at=NOW + timedelta(hours=1))
        mine = sim.publish(endpoint_id="e", deadline_at=NOW + timedelta(hours=1))
        seen: list[tuple[str, int]] = []
        await run_deliveries(
            sim, [mine], on_row=lambda row: seen.append((row.cause, len(receiver.received)))
        )
        assert sim.delivery(mine).state is State.DELIVERED
        assert sim.delivery(other).state is State.SCHEDULED  # never touched: not in scope
        sim.store.close()
        return seen


def test_rows_are_reported_as_they_happen_and_only_for_the_chosen_delivery() -> None:
    with scripted(503, 503, 200) as receiver:
        seen = asyncio.run(_run_reporting(receiver, []))
    assert seen == [
        ("published", 0),
        ("leased", 0),
        ("retry_scheduled", 1),  # reported before the second request went out
        ("leased", 1),
        ("retry_scheduled", 2),
        ("leased", 2),
        ("delivered", 3),
    ]


def test_a_worker_whose_clock_runs_late_still_finishes() -> None:
    with scripted(503, 200) as receiver:
        seen = asyncio.run(_run_reporting(receiver, ["worker_clock_skew:skew=-45"]))
    assert seen[-1] == ("delivered", 2)


_FIRST_REQUEST_IMPORTS = """
import asyncio, sys
import httpx
from sender_sim.commands.support import delivery_client

async def main(warm):
    client_cm = delivery_client() if warm else httpx.AsyncClient()
    async with client_cm as client:
        before = set(sys.modules)
        try:
            await client.get("http://127.0.0.1:9/")  # the discard port: refused at once
        except httpx.TransportError:
            pass
        print(sorted(set(sys.modules) - before))

asyncio.run(main(sys.argv[1] == "warm"))
"""


@pytest.mark.parametrize("warm", [True, False])
def test_the_delivery_client_sets_up_before_the_first_attempt(warm: bool) -> None:
    """A fresh process: the first request through ``delivery_client`` imports nothing (its
    lazy set-up is done on entering), where a plain client's first request imports anyio's
    backend — the cost that made attempt 1 late in check-sender's demo."""
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_REQUEST_IMPORTS, "warm" if warm else "plain"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    imported = done.stdout.strip()
    if warm:
        assert imported == "[]"
    else:
        assert "anyio._backends._asyncio" in imported
