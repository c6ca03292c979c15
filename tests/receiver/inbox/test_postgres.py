"""The PostgreSQL inbox on a real server: the contract, replicas sharing it, transactional work.

Each test gets its own schema (dropped afterwards) and an injected fake clock, so lease expiry is
exercised without waiting. "Replicas" are several :class:`PostgresInbox` instances (each with its
own pool) on one schema: what two receiver processes see.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from receiver.exceptions import InboxError
from receiver.inbox import ClaimOutcome, RecordState
from receiver.inbox.postgres import PostgresInbox
from tests.receiver.inbox.backends import FakeClock, WorkFailure
from tests.receiver.inbox.postgres_backend import drop_schema, fresh_schema, inbox_location

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

LEASE = timedelta(seconds=30)
Opener = Callable[..., Awaitable[PostgresInbox]]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def schema(postgres_dsn: str) -> AsyncIterator[str]:
    name = fresh_schema("inbox")
    try:
        yield name
    finally:
        await drop_schema(postgres_dsn, name)


@pytest.fixture
async def replica(
    postgres_dsn: str, schema: str, clock: FakeClock
) -> AsyncIterator[Callable[..., Awaitable[PostgresInbox]]]:
    """Opens PostgresInbox replicas on the test's schema; all are closed at the end."""
    opened: list[PostgresInbox] = []

    async def open_replica(**parameters: Any) -> PostgresInbox:
        parameters.setdefault("pool_max_size", 4)
        inbox = await PostgresInbox.connect(
            inbox_location(postgres_dsn, schema, **parameters), lease=LEASE, clock=clock
        )
        opened.append(inbox)
        return inbox

    try:
        yield open_replica
    finally:
        for inbox in opened:
            await inbox.close()


async def _execute(dsn: str, query: sql.Composable, *params: Any) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cursor = await conn.execute(query, params or None)
        return await cursor.fetchall() if cursor.description else []


async def _effects_table(dsn: str, schema: str) -> None:
    await _execute(
        dsn,
        sql.SQL("CREATE TABLE {}.effects (event_id text NOT NULL, note text)").format(
            sql.Identifier(schema)
        ),
    )


async def _effects(dsn: str, schema: str) -> list[tuple[Any, ...]]:
    return await _execute(
        dsn,
        sql.SQL("SELECT event_id, note FROM {}.effects ORDER BY event_id, note").format(
            sql.Identifier(schema)
        ),
    )


async def test_claim_duplicate_commit_and_stored_status(replica: Opener, clock: FakeClock) -> None:
    inbox = await replica()
    start = clock()
    first = await inbox.claim("evt_1")
    assert (first.outcome, first.token, first.taken_over) == (ClaimOutcome.CLAIMED, 1, False)
    clock.advance(timedelta(seconds=10, microseconds=1))
    second = await inbox.claim("evt_1")
    assert (second.outcome, second.retry_after) == (ClaimOutcome.IN_FLIGHT, 20)
    clock.advance(timedelta(seconds=1))
    assert await inbox.commit("evt_1", first.token, 202) is True
    third = await inbox.claim("evt_1")
    assert (third.outcome, third.status) == (ClaimOutcome.COMMITTED, 202)
    record = await inbox.lookup("evt_1")
    assert record is not None
    assert record.state is RecordState.COMMITTED
    assert (record.token, record.deliveries, record.effects, record.status) == (1, 3, 1, 202)
    assert record.created_at == start
    assert record.committed_at == clock()
    assert record.lease_expires_at is None
    assert await inbox.lookup("evt_unknown") is None


async def test_retry_after_is_whole_seconds_rounded_up_and_at_least_one(
    replica: Opener, clock: FakeClock
) -> None:
    inbox = await replica()
    await inbox.claim("evt_r")
    clock.advance(LEASE - timedelta(microseconds=1))
    claim = await inbox.claim("evt_r")
    assert (claim.outcome, claim.retry_after) == (ClaimOutcome.IN_FLIGHT, 1)


async def test_an_expired_lease_is_taken_over_by_another_replica_and_fences_the_first(
    replica: Opener, clock: FakeClock
) -> None:
    replica_a, replica_b = await replica(), await replica()
    dead = await replica_a.claim("evt_t")
    clock.advance(LEASE - timedelta(microseconds=1))
    assert (await replica_b.claim("evt_t")).outcome is ClaimOutcome.IN_FLIGHT
    clock.advance(timedelta(microseconds=1))  # exactly at expiry: the lease is over
    taker = await replica_b.claim("evt_t")
    assert (taker.outcome, taker.token, taker.taken_over) == (ClaimOutcome.CLAIMED, 2, True)
    ran: list[str] = []
    assert await replica_a.commit("evt_t", dead.token, 200, [ran.append]) is False
    assert await replica_a.release("evt_t", dead.token) is False
    assert ran == []  # a stale token runs no work
    assert await replica_b.commit("evt_t", taker.token, 200) is True
    record = await replica_a.lookup("evt_t")
    assert record is not None
    assert (record.state, record.token, record.effects) == (RecordState.COMMITTED, 2, 1)


async def test_an_expired_claim_not_yet_taken_over_still_commits(
    replica: Opener, clock: FakeClock
) -> None:
    inbox = await replica()
    claim = await inbox.claim("evt_slow")
    clock.advance(LEASE * 3)
    assert await inbox.commit("evt_slow", claim.token, 200) is True


async def test_release_makes_the_event_claimable_at_once_with_a_new_token(
    replica: Opener,
) -> None:
    inbox = await replica()
    claim = await inbox.claim("evt_rel")
    assert await inbox.release("evt_rel", claim.token + 1) is False
    assert await inbox.release("evt_rel", claim.token) is True
    assert await inbox.release("evt_rel", claim.token) is False
    record = await inbox.lookup("evt_rel")
    assert record is not None
    assert record.state is RecordState.RELEASED
    again = await inbox.claim("evt_rel")
    assert (again.outcome, again.token, again.taken_over) == (ClaimOutcome.CLAIMED, 2, False)
    assert await inbox.commit("evt_rel", claim.token, 200) is False


async def test_concurrent_copies_on_two_replicas_have_exactly_one_winner(
    replica: Opener,
) -> None:
    replicas = [await replica(pool_max_size=8), await replica(pool_max_size=8)]
    events = [f"evt_c{i}" for i in range(8)]
    claims = await asyncio.gather(
        *(replicas[n % 2].claim(event) for event in events for n in range(12))
    )
    for event in events:
        mine = [c for c in claims if c.event_id == event]
        winners = [c for c in mine if c.outcome is ClaimOutcome.CLAIMED]
        assert len(winners) == 1, f"{event}: {len(winners)} winners"
        assert all(c.outcome is ClaimOutcome.IN_FLIGHT for c in mine if c not in winners)
        record = await replicas[0].lookup(event)
        assert record is not None
        assert record.deliveries == 12


async def test_concurrent_takeovers_of_one_expired_lease_have_exactly_one_winner(
    replica: Opener, clock: FakeClock
) -> None:
    replicas = [await replica(pool_max_size=6), await replica(pool_max_size=6)]
    await replicas[0].claim("evt_x")
    clock.advance(LEASE)
    claims = await asyncio.gather(*(replicas[n % 2].claim("evt_x") for n in range(12)))
    winners = [c for c in claims if c.outcome is ClaimOutcome.CLAIMED]
    assert [(w.token, w.taken_over) for w in winners] == [(2, True)]


async def test_transactional_work_commits_with_the_record(
    replica: Opener, postgres_dsn: str, schema: str
) -> None:
    inbox = await replica()
    await _effects_table(postgres_dsn, schema)

    async def coroutine_work(conn: psycopg.AsyncConnection[Any]) -> None:
        assert conn.info.transaction_status is psycopg.pq.TransactionStatus.INTRANS
        await conn.execute("INSERT INTO effects VALUES ('evt_w', 'async')")

    def sync_work(conn: psycopg.AsyncConnection[Any]) -> Any:
        # A plain function may hand back the awaitable; the inbox awaits it in the transaction.
        return conn.execute("INSERT INTO effects VALUES ('evt_w', 'sync')")

    claim = await inbox.claim("evt_w")
    assert await inbox.commit("evt_w", claim.token, 200, [coroutine_work, sync_work]) is True
    assert await _effects(postgres_dsn, schema) == [("evt_w", "async"), ("evt_w", "sync")]


async def test_a_failing_work_rolls_back_everything_and_keeps_the_claim(
    replica: Opener, postgres_dsn: str, schema: str
) -> None:
    inbox = await replica()
    await _effects_table(postgres_dsn, schema)

    async def writes(conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute("INSERT INTO effects VALUES ('evt_f', 'lost')")

    async def fails(conn: psycopg.AsyncConnection[Any]) -> None:
        raise WorkFailure("handler failed after writing")

    claim = await inbox.claim("evt_f")
    with pytest.raises(WorkFailure):
        await inbox.commit("evt_f", claim.token, 200, [writes, fails])
    assert await _effects(postgres_dsn, schema) == []
    record = await inbox.lookup("evt_f")
    assert record is not None
    assert (record.state, record.token, record.effects) == (RecordState.IN_FLIGHT, 1, 0)
    # A work whose SQL fails: the database's own error comes back unchanged, nothing is kept.
    with pytest.raises(psycopg.errors.UndefinedTable):
        await inbox.commit("evt_f", claim.token, 200, [writes, _insert_into_missing_table])
    assert await _effects(postgres_dsn, schema) == []
    # The caller still holds the claim and may commit after all.
    assert await inbox.commit("evt_f", claim.token, 200, [writes]) is True
    assert await _effects(postgres_dsn, schema) == [("evt_f", "lost")]


async def _insert_into_missing_table(conn: psycopg.AsyncConnection[Any]) -> None:
    await conn.execute("INSERT INTO no_such_table VALUES (1)")


async def test_purge_deletes_only_records_committed_before_the_cutoff(
    replica: Opener, clock: FakeClock
) -> None:
    inbox = await replica()
    for event in ("evt_old", "evt_new", "evt_open"):
        await inbox.claim(event)
    await inbox.commit("evt_old", 1, 200)
    clock.advance(timedelta(days=90))
    cutoff = clock()
    await inbox.commit("evt_new", 1, 200)
    assert await inbox.purge(cutoff) == 1
    assert await inbox.lookup("evt_old") is None
    assert await inbox.lookup("evt_new") is not None
    assert await inbox.lookup("evt_open") is not None  # in flight: never purged
    assert await inbox.purge(cutoff) == 0
    with pytest.raises(InboxError):
        await inbox.purge(cutoff.replace(tzinfo=None))


async def test_transaction_handle_sees_the_inbox_schema_first(replica: Opener, schema: str) -> None:
    inbox = await replica()
    seen: list[str] = []

    async def where(conn: psycopg.AsyncConnection[Any]) -> None:
        row = await (await conn.execute("SELECT current_schema()")).fetchone()
        assert row is not None
        seen.append(row[0])

    claim = await inbox.claim("evt_s")
    await inbox.commit("evt_s", claim.token, 200, [where])
    assert seen == [schema]
    assert inbox.schema == schema


async def test_claims_skip_the_wal_flush_but_the_commit_transaction_stays_durable(
    replica: Opener,
) -> None:
    inbox = await replica(pool_max_size=1)  # one connection: claim and commit share a session
    seen: list[str] = []

    async def setting(conn: psycopg.AsyncConnection[Any]) -> None:
        row = await (await conn.execute("SHOW synchronous_commit")).fetchone()
        assert row is not None
        seen.append(row[0])

    claim = await inbox.claim("evt_d")
    await inbox.release("evt_d", claim.token)
    claim = await inbox.claim("evt_d")
    assert await inbox.commit("evt_d", claim.token, 200, [setting]) is True
    # The claim's set_config(…, true) was local to its own statement: the session is untouched.
    assert seen == ["on"]


async def test_a_naive_clock_is_refused(postgres_dsn: str, schema: str) -> None:
    location = inbox_location(postgres_dsn, schema)
    naive = FakeClock(datetime(2026, 1, 1, 9, 0))  # no tzinfo
    async with await PostgresInbox.connect(location, clock=naive) as inbox:
        with pytest.raises(InboxError, match="timezone-aware"):
            await inbox.claim("evt_naive")


async def test_work_gets_a_plain_connection_inside_the_transaction_savepoints_included(
    replica: Opener, postgres_dsn: str, schema: str
) -> None:
    inbox = await replica()
    await _effects_table(postgres_dsn, schema)

    async def careful(conn: psycopg.AsyncConnection[Any]) -> None:
        cursor = await conn.execute("INSERT INTO effects VALUES ('evt_sp', 'first')")
        assert cursor.rowcount == 1  # results at once: the connection is not pipelined
        with pytest.raises(psycopg.errors.UndefinedTable):
            async with conn.transaction():  # a savepoint inside the inbox transaction
                await conn.execute("INSERT INTO no_such_table VALUES (1)")
        await conn.execute("INSERT INTO effects VALUES ('evt_sp', 'second')")

    claim = await inbox.claim("evt_sp")
    assert await inbox.commit("evt_sp", claim.token, 200, [careful]) is True
    assert await _effects(postgres_dsn, schema) == [("evt_sp", "first"), ("evt_sp", "second")]
    record = await inbox.lookup("evt_sp")
    assert record is not None
    assert record.state is RecordState.COMMITTED
