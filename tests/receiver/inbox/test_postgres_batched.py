"""The PostgreSQL inbox batches concurrent deliveries: one statement for many claims or commits.

Concurrent callers are ``asyncio.gather`` of inbox operations on one replica: submitted during one
turn of the event loop, they form one batch (``PostgresInbox.stats`` counts batches and the
operations they carried). What batching must not change is checked against the in-memory twin:
a burst of concurrent claims, then a burst of concurrent commits, answers exactly what the same
operations answer one by one, in submission order.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from receiver.exceptions import InboxUnavailable
from receiver.inbox import Claim, ClaimOutcome, Inbox, InboxRecord, RecordState
from receiver.inbox.postgres import PostgresInbox, PostgresInsert
from receiver.inbox.postgres_batch import MAX_BATCH
from tests.receiver.inbox.backends import FakeClock, memory_backend
from tests.receiver.inbox.postgres_backend import (
    drop_schema,
    effects_inbox,
    fresh_schema,
    inbox_location,
    open_postgres,
    terminate_backends,
)

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

LEASE = timedelta(seconds=30)


@pytest.fixture
async def opened(postgres_dsn: str) -> AsyncIterator[tuple[PostgresInbox, str, FakeClock]]:
    """An inbox (its sessions named after its schema) with an ``effects`` table next to it."""
    clock = FakeClock()
    table = "event_id text NOT NULL, note text, n int, at timestamptz"
    async with effects_inbox(
        postgres_dsn,
        "batch",
        table,
        clock=clock,
        lease=LEASE,
        sessions_named_after_schema=True,
        pool_max_size=4,
        check_idle_after=None,
    ) as (inbox, schema):
        yield inbox, schema, clock


async def _effects(inbox: PostgresInbox) -> list[tuple[Any, ...]]:
    async with inbox.connection() as conn:
        cursor = await conn.execute("SELECT event_id, note, n FROM effects ORDER BY event_id, note")
        return await cursor.fetchall()


def _row(event_id: str, note: str | None, n: Any = None) -> PostgresInsert:
    return PostgresInsert("effects", ("event_id", "note", "n"), (event_id, note, n))


async def test_concurrent_claims_of_distinct_events_share_one_statement(
    opened: tuple[PostgresInbox, str, FakeClock],
) -> None:
    inbox, _, _ = opened
    events = [f"evt_{n:03d}" for n in range(50)]
    claims = await asyncio.gather(*(inbox.claim(event) for event in reversed(events)))
    assert [(c.event_id, c.outcome, c.token) for c in claims] == [
        (event, ClaimOutcome.CLAIMED, 1) for event in reversed(events)
    ]
    stats = inbox.stats.claims
    assert (stats.batches, stats.operations, stats.largest) == (1, 50, 50)
    record = await inbox.lookup("evt_007")
    assert record is not None
    assert (record.state, record.deliveries, record.token) == (RecordState.IN_FLIGHT, 1, 1)


async def test_a_batch_carries_at_most_max_batch_claims(
    opened: tuple[PostgresInbox, str, FakeClock],
) -> None:
    inbox, _, _ = opened
    claims = await asyncio.gather(*(inbox.claim(f"evt_m{n}") for n in range(MAX_BATCH + 10)))
    assert all(c.outcome is ClaimOutcome.CLAIMED for c in claims)
    stats = inbox.stats.claims
    assert stats.largest == MAX_BATCH
    assert stats.batches >= 2


async def test_copies_of_one_event_in_a_burst_are_claimed_in_order_one_per_statement(
    opened: tuple[PostgresInbox, str, FakeClock],
) -> None:
    inbox, _, _ = opened
    order = ["evt_a", "evt_b", "evt_a", "evt_c", "evt_a", "evt_b"]
    claims = await asyncio.gather(*(inbox.claim(event) for event in order))
    assert [(c.event_id, c.outcome) for c in claims] == [
        ("evt_a", ClaimOutcome.CLAIMED),  # the first copy submitted wins …
        ("evt_b", ClaimOutcome.CLAIMED),
        ("evt_a", ClaimOutcome.IN_FLIGHT),  # … and the later copies see its claim
        ("evt_c", ClaimOutcome.CLAIMED),
        ("evt_a", ClaimOutcome.IN_FLIGHT),
        ("evt_b", ClaimOutcome.IN_FLIGHT),
    ]
    assert {c.retry_after for c in claims if c.outcome is ClaimOutcome.IN_FLIGHT} == {30}
    stats = inbox.stats.claims
    assert (stats.batches, stats.operations, stats.largest) == (3, 6, 3)
    deliveries = {}
    for event in ("evt_a", "evt_b", "evt_c"):
        record = await inbox.lookup(event)
        assert record is not None
        deliveries[event] = (record.deliveries, record.token)
    assert deliveries == {"evt_a": (3, 1), "evt_b": (2, 1), "evt_c": (1, 1)}


async def test_concurrent_commits_share_one_statement_with_their_rows(
    opened: tuple[PostgresInbox, str, FakeClock],
) -> None:
    inbox, schema, clock = opened
    events = [f"evt_{n}" for n in range(6)]
    claims = await asyncio.gather(*(inbox.claim(event) for event in events))
    clock.advance(LEASE)
    taker = await inbox.claim("evt_5")  # evt_5's first claim is now stale
    assert taker.taken_over
    qualified = PostgresInsert(f"{schema}.effects", ("event_id", "note"), ("evt_1", "qualified"))
    works: list[list[PostgresInsert]] = [
        [],  # no work: the compare-and-set alone
        [_row("evt_1", "first", 1), qualified],  # two rows, two tables' spellings
        [_row("evt_2", None, "42")],  # untyped text into an int column, a NULL
        [PostgresInsert("effects", ("event_id", "n", "at"), ("evt_3", 7, clock()))],  # typed
        [_row("evt_4", "it's 50% 'quoted'", -3)],
        [_row("evt_5", "stale")],  # a stale token: nothing written
    ]
    results = await asyncio.gather(
        *(
            inbox.commit(event, claim.token, 200 + n, work)
            for n, (event, claim, work) in enumerate(zip(events, claims, works, strict=True))
        )
    )
    assert results == [True, True, True, True, True, False]
    stats = inbox.stats.commits
    assert (stats.batches, stats.operations, stats.alone) == (1, 6, 0)
    assert await _effects(inbox) == [
        ("evt_1", "first", 1),
        ("evt_1", "qualified", None),
        ("evt_2", None, 42),
        ("evt_3", None, 7),
        ("evt_4", "it's 50% 'quoted'", -3),
    ]
    async with inbox.connection() as conn:
        cursor = await conn.execute("SELECT at FROM effects WHERE at IS NOT NULL")
        assert await cursor.fetchall() == [(clock(),)]
    for n, event in enumerate(events[:5]):
        record = await inbox.lookup(event)
        assert record is not None
        assert (record.state, record.status, record.effects) == (
            RecordState.COMMITTED,
            200 + n,
            1,
        )
        assert record.committed_at == clock()
    record = await inbox.lookup("evt_5")
    assert record is not None
    assert (record.state, record.token, record.effects) == (RecordState.IN_FLIGHT, 2, 0)


async def test_one_failing_row_fails_only_its_own_commit_with_its_own_error(
    opened: tuple[PostgresInbox, str, FakeClock],
) -> None:
    inbox, _, _ = opened
    events = [f"evt_{n}" for n in range(5)]
    claims = await asyncio.gather(*(inbox.claim(event) for event in events))
    guilty = PostgresInsert("effects", ("event_id", "note"), (None, "breaks NOT NULL"))
    works = [[_row(event, "kept")] for event in events]
    works[2] = [_row("evt_2", "lost"), guilty]
    results = await asyncio.gather(
        *(
            inbox.commit(event, claim.token, 200, work)
            for event, claim, work in zip(events, claims, works, strict=True)
        ),
        return_exceptions=True,
    )
    assert isinstance(results[2], psycopg.errors.NotNullViolation)
    assert results[:2] + results[3:] == [True] * 4
    assert inbox.stats.commits.alone == 5  # the batch was redone delivery by delivery
    assert await _effects(inbox) == [(event, "kept", None) for event in events if event != "evt_2"]
    record = await inbox.lookup("evt_2")
    assert record is not None
    assert (record.state, record.token, record.effects) == (RecordState.IN_FLIGHT, 1, 0)
    assert await inbox.commit("evt_2", claims[2].token, 200, [_row("evt_2", "kept")]) is True


async def test_a_batch_whose_rows_would_wait_for_a_lock_becomes_transactions(
    opened: tuple[PostgresInbox, str, FakeClock], postgres_dsn: str
) -> None:
    inbox, schema, _ = opened
    events = ["evt_l1", "evt_l2", "evt_l3"]
    claims = await asyncio.gather(*(inbox.claim(event) for event in events))
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as locker:
        await locker.execute(
            sql.SQL("LOCK TABLE {}.effects IN EXCLUSIVE MODE").format(sql.Identifier(schema))
        )
        committing = asyncio.gather(
            *(
                inbox.commit(event, claim.token, 200, [_row(event, "waited")])
                for event, claim in zip(events, claims, strict=True)
            )
        )
        await _until_waiting(postgres_dsn, schema, count=len(events))
        assert not committing.done()  # three explicit transactions wait for the lock
        record = await inbox.lookup("evt_l1")
        assert record is not None
        assert record.state is RecordState.IN_FLIGHT  # nothing committed while they wait
        await locker.rollback()
    assert await committing == [True, True, True]
    assert inbox.stats.commits.alone == 3
    assert await _effects(inbox) == [(event, "waited", None) for event in events]


async def test_a_claim_batch_never_waits_for_one_locked_row_with_the_others(
    opened: tuple[PostgresInbox, str, FakeClock], postgres_dsn: str
) -> None:
    inbox, schema, _ = opened
    held = await inbox.claim("evt_held")
    assert await inbox.commit("evt_held", held.token, 200)
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as locker:
        await locker.execute(  # another session holds the event's row (a long commit, say)
            sql.SQL(
                "SELECT 1 FROM {}.hookproof_inbox WHERE event_id = 'evt_held' FOR UPDATE"
            ).format(sql.Identifier(schema))
        )
        locked = asyncio.ensure_future(inbox.claim("evt_held"))
        free = asyncio.gather(inbox.claim("evt_free1"), inbox.claim("evt_free2"))
        outcomes = [claim.outcome for claim in await free]  # not held up by the locked row
        assert outcomes == [ClaimOutcome.CLAIMED, ClaimOutcome.CLAIMED]
        await _until_waiting(postgres_dsn, schema, count=1)
        assert not locked.done()  # only the claim of the locked event waits, on its own
        await locker.rollback()
    assert (await locked).outcome is ClaimOutcome.COMMITTED
    assert inbox.stats.claims.alone == 3


async def _until_waiting(dsn: str, application_name: str, *, count: int) -> None:
    """Until ``count`` sessions of ``application_name`` wait for a lock."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        for _ in range(500):
            cursor = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE application_name = %s AND wait_event_type = 'Lock'",
                (application_name,),
            )
            row = await cursor.fetchone()
            if row is not None and row[0] >= count:
                return
            await asyncio.sleep(0.01)  # real-time: the server's sessions run on their own
    raise AssertionError(f"{count} sessions never waited for a lock")


async def test_a_lost_database_fails_every_caller_of_the_batch_with_inbox_unavailable(
    postgres_dsn: str,
) -> None:
    schema = fresh_schema("batchlost")
    location = inbox_location(
        postgres_dsn, schema, application_name=schema, pool_min_size=1, pool_max_size=1
    )
    inbox = await PostgresInbox.connect(location, lease=LEASE, check_idle_after=None)
    try:
        await inbox.claim("evt_warm")  # the pool's one connection is open and idle
        assert await terminate_backends(postgres_dsn, schema) == 1
        failed = await asyncio.gather(
            *(inbox.claim(f"evt_c{n}") for n in range(4)), return_exceptions=True
        )
        assert all(isinstance(result, InboxUnavailable) for result in failed), failed
        stats = inbox.stats.claims
        assert (stats.batches, stats.failed, stats.alone) == (2, 1, 0)  # not redone one by one
        claims = await _eventually(
            lambda: asyncio.gather(*(inbox.claim(f"evt_c{n}") for n in range(4)))
        )
        assert [c.outcome for c in claims] == [ClaimOutcome.CLAIMED] * 4  # nothing was kept
        assert await terminate_backends(postgres_dsn, schema) == 1
        results = await asyncio.gather(
            *(inbox.commit(c.event_id, c.token, 200) for c in claims), return_exceptions=True
        )
        assert all(isinstance(result, InboxUnavailable) for result in results), results
        assert len({id(result) for result in results}) == 4
        stats = inbox.stats.commits
        assert (stats.batches, stats.operations, stats.failed) == (1, 4, 1)  # failed as a whole
        # Nothing was committed; once the pool has reconnected the commits go through.
        retried = await _eventually(
            lambda: asyncio.gather(*(inbox.commit(c.event_id, c.token, 200) for c in claims))
        )
        assert retried == [True] * 4
        record = await inbox.lookup("evt_c0")
        assert record is not None
        assert (record.state, record.effects) == (RecordState.COMMITTED, 1)
    finally:
        await inbox.close()
        await drop_schema(postgres_dsn, schema)


async def _eventually(operation: Callable[[], Awaitable[Any]]) -> Any:
    """``operation()``'s value once it stops raising InboxUnavailable (the pool reconnecting)."""
    for _ in range(100):
        try:
            return await operation()
        except InboxUnavailable:
            await asyncio.sleep(0.05)  # real-time: the pool reconnects on its own schedule
    raise AssertionError("the inbox did not recover")


async def test_a_caller_cancelled_mid_batch_does_not_disturb_the_others(
    opened: tuple[PostgresInbox, str, FakeClock], postgres_dsn: str
) -> None:
    inbox, schema, _ = opened
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as locker:
        # An uncommitted insert of evt_x's row: a claim of evt_x waits for this transaction.
        await locker.execute(
            sql.SQL(
                "INSERT INTO {}.hookproof_inbox (event_id, state, token, deliveries, effects,"
                " created_at, last_claim) VALUES ('evt_x', 'committed', 1, 1, 1, now(), 'claimed')"
            ).format(sql.Identifier(schema))
        )
        tasks = [asyncio.ensure_future(inbox.claim(event)) for event in ("evt_x", "evt_y", "evt_z")]
        y, z = await tasks[1], await tasks[2]  # the batch met the lock: each claim on its own
        await _until_waiting(postgres_dsn, schema, count=1)  # evt_x's claim is in flight
        tasks[0].cancel()
        await locker.rollback()
    with pytest.raises(asyncio.CancelledError):
        await tasks[0]
    assert (y.outcome, z.outcome) == (ClaimOutcome.CLAIMED, ClaimOutcome.CLAIMED)
    # the cancelled caller's claim still ran, and, made for nobody, was released at once
    record = await _until_recorded(inbox, "evt_x", RecordState.RELEASED)
    assert record.token == 1
    again = await inbox.claim("evt_x")
    assert (again.outcome, again.token) == (ClaimOutcome.CLAIMED, 2)
    assert inbox.stats.claims.alone == 3


async def _until_recorded(
    inbox: PostgresInbox, event_id: str, state: RecordState | None = None
) -> InboxRecord:
    for _ in range(200):
        record = await inbox.lookup(event_id)
        if record is not None and (state is None or record.state is state):
            return record
        await asyncio.sleep(0.01)  # real-time: the claim's statement runs in a task of its own
    raise AssertionError(f"{event_id} was never recorded" + (f" {state}" if state else ""))


async def test_close_finishes_what_was_submitted_then_refuses(
    opened: tuple[PostgresInbox, str, FakeClock],
) -> None:
    inbox, _, _ = opened
    claiming = asyncio.ensure_future(asyncio.gather(*(inbox.claim(f"evt_{n}") for n in range(3))))
    await asyncio.sleep(0)  # submitted, not yet run
    await inbox.close()
    assert [c.outcome for c in await claiming] == [ClaimOutcome.CLAIMED] * 3
    with pytest.raises(InboxUnavailable, match="closed"):
        await inbox.claim("evt_late")


# -- batching answers what one-by-one operations answer ------------------------------------------

EVENTS = ("evt_a", "evt_b", "evt_c", "evt_d")
claim_bursts = st.lists(st.sampled_from(EVENTS), min_size=1, max_size=12)
commit_bursts = st.lists(
    st.tuples(
        st.sampled_from(EVENTS),
        st.integers(0, 2),  # the token: 1 is the first claim's, the others are stale or unknown
        st.sampled_from([200, 202, 410]),
        st.sampled_from(["none", "row", "two_rows", "failing_row"]),
    ),
    max_size=12,
)


def _outcome(result: Any) -> Any:
    if isinstance(result, BaseException):
        return "raised"
    if isinstance(result, Claim):
        return (result.event_id, result.outcome, result.token, result.retry_after)
    return result


async def _burst(inbox: Inbox, calls: list[Any], *, together: bool) -> list[Any]:
    if together:
        results = await asyncio.gather(*(call(inbox) for call in calls), return_exceptions=True)
        return [_outcome(result) for result in results]
    outcomes = []
    for call in calls:
        try:
            outcomes.append(_outcome(await call(inbox)))
        except Exception as error:
            outcomes.append(_outcome(error))
    return outcomes


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(claims=claim_bursts, commits=commit_bursts)
def test_concurrent_bursts_answer_what_one_by_one_operations_answer(
    postgres_dsn: str, claims: list[str], commits: list[tuple[str, int, int, str]]
) -> None:
    async def scenario() -> None:
        clock = FakeClock()
        memory = await memory_backend.open(clock, LEASE)
        postgres = await open_postgres(postgres_dsn, clock, LEASE, rows=True)
        try:
            tags = iter(range(1000))

            def commit_call(event: str, token: int, status: int, work: str) -> Any:
                number = next(tags)

                def call(inbox: Inbox) -> Any:
                    opened = memory if inbox is memory.inbox else postgres
                    rows = []
                    if work in ("row", "two_rows", "failing_row"):
                        rows.append(opened.effect(f"{event}#{number}"))
                    if work == "two_rows":
                        rows.append(opened.effect(f"{event}#{number}'"))
                    if work == "failing_row":
                        rows.append(_failing_row(opened.inbox))
                    return inbox.commit(event, token, status, rows)

                return call

            claim_calls = [lambda inbox, e=event: inbox.claim(e) for event in claims]
            commit_calls = [commit_call(*commit) for commit in commits]
            expected = await _burst(memory.inbox, claim_calls, together=False)
            assert await _burst(postgres.inbox, claim_calls, together=True) == expected
            expected = await _burst(memory.inbox, commit_calls, together=False)
            assert await _burst(postgres.inbox, commit_calls, together=True) == expected
            assert await postgres.effects() == await memory.effects()
            for event in EVENTS:
                assert await postgres.inbox.lookup(event) == await memory.inbox.lookup(event)
        finally:
            await postgres.cleanup()
            await memory.cleanup()

    asyncio.run(scenario())


def _failing_row(inbox: Inbox) -> Any:
    """A work that fails: for PostgreSQL a row its table refuses (NOT NULL), folded like the
    others; for the in-memory twin a callable that raises."""
    if isinstance(inbox, PostgresInbox):
        return PostgresInsert("agreement_effects", ("tag",), (None,))

    def fails(store: dict[str, Any]) -> None:
        raise ValueError("the row is refused")

    return fails


async def test_a_batch_is_spelled_in_the_connection_encoding(postgres_dsn: str) -> None:
    schema = fresh_schema("batchenc")
    location = inbox_location(postgres_dsn, schema, client_encoding="LATIN1")
    inbox = await PostgresInbox.connect(location, lease=LEASE, clock=FakeClock())
    try:
        async with inbox.connection() as conn:
            await conn.execute("CREATE TABLE effects (event_id text NOT NULL, note text)")
        events = ["evt_é1", "evt_é2"]
        claims = await asyncio.gather(*(inbox.claim(event) for event in events))
        rows = [PostgresInsert("effects", ("event_id", "note"), (e, "café")) for e in events]
        pairs = zip(claims, rows, strict=True)
        results = await asyncio.gather(
            *(inbox.commit(c.event_id, c.token, 200, [r]) for c, r in pairs)
        )
        assert results == [True, True]
        assert inbox.stats.commits.batches == 1
        async with inbox.connection() as conn:
            cursor = await conn.execute("SELECT event_id, note FROM effects ORDER BY event_id")
            assert await cursor.fetchall() == [(event, "café") for event in events]
    finally:
        await inbox.close()
        await drop_schema(postgres_dsn, schema)
