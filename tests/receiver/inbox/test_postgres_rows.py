"""The PostgreSQL inbox's two round trips: rows to insert fold into the one commit statement.

A :class:`PostgresInsert` work is data, so ``commit`` writes it in the same statement as the
compare-and-set (data-modifying CTEs selecting from it): one durable round trip, a stale token
inserts nothing, a failing insert keeps nothing and raises the database's own error.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from receiver.exceptions import ConfigurationError
from receiver.inbox import ClaimOutcome, RecordState
from receiver.inbox.postgres import PostgresInbox, PostgresInsert
from tests.receiver.inbox.backends import FakeClock
from tests.receiver.inbox.postgres_backend import effects_inbox

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

LEASE = timedelta(seconds=30)


@pytest.fixture
async def opened(postgres_dsn: str) -> AsyncIterator[tuple[PostgresInbox, str, FakeClock]]:
    clock = FakeClock()
    table = "event_id text NOT NULL, note text, n int"
    async with effects_inbox(
        postgres_dsn, "rows", table, clock=clock, lease=LEASE, pool_max_size=1
    ) as (inbox, schema):
        yield inbox, schema, clock


async def _effects(inbox: PostgresInbox) -> list[tuple[Any, ...]]:
    async with inbox.connection() as conn:
        cursor = await conn.execute("SELECT event_id, note, n FROM effects ORDER BY note")
        return await cursor.fetchall()


def _row(event_id: str, note: str | None, n: int | None = None) -> PostgresInsert:
    return PostgresInsert("effects", ("event_id", "note", "n"), (event_id, note, n))


class _Statements:
    """Counts the statements (round trips) a connection sends."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[str] = []
        self.grew = asyncio.Event()
        original = psycopg.AsyncCursor.execute

        async def counted(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            text = query if isinstance(query, str) else query.as_string(cursor.connection)
            self.sent.append(" ".join(text.split())[:80])
            self.grew.set()
            return await original(cursor, query, *args, **kwargs)

        monkeypatch.setattr(psycopg.AsyncCursor, "execute", counted)


async def test_rows_commit_with_the_record_in_one_statement(
    opened: tuple[PostgresInbox, str, FakeClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox, _, _ = opened
    claim = await inbox.claim("evt_1")
    statements = _Statements(monkeypatch)
    rows = [_row("evt_1", "first", 1), _row("evt_1", "50% 'quoted' %(x)s", None)]
    assert await inbox.commit("evt_1", claim.token, 201, rows) is True
    assert len(statements.sent) == 1, statements.sent  # no BEGIN, no COMMIT: one round trip
    assert statements.sent[0].startswith("SET LOCAL lock_timeout = '1ms'; WITH done AS")
    monkeypatch.undo()
    assert await _effects(inbox) == [("evt_1", "50% 'quoted' %(x)s", None), ("evt_1", "first", 1)]
    record = await inbox.lookup("evt_1")
    assert record is not None
    assert (record.state, record.status, record.effects) == (RecordState.COMMITTED, 201, 1)
    again = await inbox.claim("evt_1")
    assert (again.outcome, again.status) == (ClaimOutcome.COMMITTED, 201)


async def test_a_stale_token_inserts_no_row(opened: tuple[PostgresInbox, str, FakeClock]) -> None:
    inbox, _, clock = opened
    first = await inbox.claim("evt_t")
    clock.advance(LEASE)
    taker = await inbox.claim("evt_t")
    assert taker.taken_over
    assert await inbox.commit("evt_t", first.token, 200, [_row("evt_t", "stale")]) is False
    assert await _effects(inbox) == []
    assert await inbox.commit("evt_t", taker.token, 200, [_row("evt_t", "taker")]) is True
    assert await _effects(inbox) == [("evt_t", "taker", None)]


async def test_a_failing_row_keeps_nothing_and_raises_the_database_error(
    opened: tuple[PostgresInbox, str, FakeClock],
) -> None:
    inbox, _, _ = opened
    claim = await inbox.claim("evt_f")
    missing = PostgresInsert("no_such_table", ("x",), (1,))
    with pytest.raises(psycopg.errors.UndefinedTable):
        await inbox.commit("evt_f", claim.token, 200, [_row("evt_f", "lost"), missing])
    with pytest.raises(psycopg.errors.NotNullViolation):
        await inbox.commit("evt_f", claim.token, 200, [_row("evt_f", "lost"), _row(None, "x")])  # type: ignore[arg-type]
    assert await _effects(inbox) == []
    record = await inbox.lookup("evt_f")
    assert record is not None
    assert (record.state, record.token, record.effects) == (RecordState.IN_FLIGHT, 1, 0)
    assert await inbox.commit("evt_f", claim.token, 200, [_row("evt_f", "kept")]) is True
    assert await _effects(inbox) == [("evt_f", "kept", None)]


async def test_a_row_mixed_with_other_work_runs_as_a_plain_work(
    opened: tuple[PostgresInbox, str, FakeClock],
) -> None:
    inbox, schema, _ = opened
    seen: list[str] = []

    async def other(conn: psycopg.AsyncConnection[Any]) -> None:
        cursor = await conn.execute("SELECT count(*) FROM effects")
        row = await cursor.fetchone()
        assert row is not None
        seen.append(f"{row[0]} before")

    qualified = PostgresInsert(f"{schema}.effects", ("event_id", "note"), ("evt_m", "qualified"))
    claim = await inbox.claim("evt_m")
    assert await inbox.commit("evt_m", claim.token, 200, [qualified, other]) is True
    assert seen == ["1 before"]  # the row was written first, in the same transaction
    assert await _effects(inbox) == [("evt_m", "qualified", None)]


def test_a_row_needs_one_value_per_column() -> None:
    with pytest.raises(ConfigurationError):
        PostgresInsert("effects", ("a", "b"), ("only one",))
    with pytest.raises(ConfigurationError):
        PostgresInsert("effects", (), ())


def test_the_folded_insert_names_its_parameters() -> None:
    params: dict[str, Any] = {}
    folded = _row("evt_1", "note", 3).folded("w0", params)
    assert params == {"w0_0": "evt_1", "w0_1": "note", "w0_2": 3}
    assert isinstance(folded, sql.Composed)


async def test_a_commit_that_would_wait_for_a_lock_becomes_a_transaction(
    opened: tuple[PostgresInbox, str, FakeClock],
    postgres_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inbox, schema, _ = opened
    claim = await inbox.claim("evt_l")
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as locker:
        await locker.execute(
            sql.SQL("LOCK TABLE {}.effects IN EXCLUSIVE MODE").format(sql.Identifier(schema))
        )
        statements = _Statements(monkeypatch)
        committing = asyncio.ensure_future(
            inbox.commit("evt_l", claim.token, 200, [_row("evt_l", "waited")])
        )
        while len(statements.sent) < 3:  # the fold gave up; the update and the insert were sent
            statements.grew.clear()
            await asyncio.wait_for(statements.grew.wait(), timeout=5)
        assert not committing.done()  # the transaction now waits for the lock
        await locker.rollback()
    assert await committing is True
    monkeypatch.undo()
    assert statements.sent[0].startswith("SET LOCAL lock_timeout")
    assert statements.sent[1].startswith("UPDATE")  # inside BEGIN … COMMIT (conn.transaction)
    assert statements.sent[2].startswith('INSERT INTO "effects"')
    assert await _effects(inbox) == [("evt_l", "waited", None)]
