"""SQLite specifics: durability across reopen, group commit, concurrency, leases, retention,
transactional mode, failures (bad files, a full disk) and shutdown."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from receiver.exceptions import ConfigurationError, InboxError, InboxUnavailable
from receiver.inbox import ClaimOutcome, InboxRecord, RecordState, SqliteInbox
from receiver.inbox.sqlite import SqliteInsert
from tests.receiver.inbox.backends import FakeClock, WorkFailure, failing

pytestmark = pytest.mark.anyio
LEASE = timedelta(seconds=30)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "inbox.db"


@pytest.fixture
async def inbox(path: Path, clock: FakeClock) -> AsyncIterator[SqliteInbox]:
    opened = SqliteInbox(path, lease=LEASE, clock=clock)
    _create_effects_table(path)
    try:
        yield opened
    finally:
        await opened.close()


def _create_effects_table(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS effects (tag TEXT NOT NULL)")
    conn.close()


def _effects(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [tag for (tag,) in conn.execute("SELECT tag FROM effects ORDER BY tag")]
    finally:
        conn.close()


def effect(tag: str) -> Callable[[sqlite3.Connection], None]:
    def record(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO effects (tag) VALUES (?)", (tag,))

    return record


class Gate:
    """A job that holds the writer thread (inside its batch's transaction) until opened."""

    def __init__(self, inbox: SqliteInbox, then: Callable[[sqlite3.Connection], Any] = repr):
        self.started = threading.Event()
        self.opened = threading.Event()
        self._then = then

        def hold(conn: sqlite3.Connection) -> Any:
            self.started.set()
            assert self.opened.wait(10), "the test never opened the gate"
            return self._then(conn)

        self.task = asyncio.ensure_future(inbox._submit(hold))

    async def wait_started(self) -> None:
        await asyncio.to_thread(self.started.wait, 10)

    async def open(self) -> None:
        self.opened.set()
        await self.task


async def _until_queued(inbox: SqliteInbox, count: int) -> None:
    """Let submitted tasks run until ``count`` jobs wait in the writer's queue (no time passes)."""
    for _ in range(10_000):
        if inbox.stats.waiting >= count:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{count} jobs never reached the queue")


# -- durability and the file ----------------------------------------------------------------------


async def test_records_and_effects_survive_close_and_reopen(path: Path, clock: FakeClock) -> None:
    first = SqliteInbox(path, lease=LEASE, clock=clock)
    _create_effects_table(path)
    done = await first.claim("evt_done")
    assert await first.commit("evt_done", done.token, 202, [effect("reminder sent")])
    pending = await first.claim("evt_pending")
    await first.close()

    clock.advance(timedelta(seconds=5))
    second = SqliteInbox(path, lease=LEASE, clock=clock)
    try:
        record = await second.lookup("evt_done")
        assert record is not None
        assert (record.state, record.status, record.effects, record.token) == (
            RecordState.COMMITTED,
            202,
            1,
            1,
        )
        assert await second.claim("evt_done") == _committed("evt_done", 202)
        in_flight = await second.claim("evt_pending")
        assert in_flight.outcome is ClaimOutcome.IN_FLIGHT
        assert in_flight.retry_after == 25
        assert await second.commit("evt_pending", pending.token, 200)
    finally:
        await second.close()
    assert _effects(path) == ["reminder sent"]


def _committed(event_id: str, status: int) -> Any:
    from receiver.inbox import Claim

    return Claim(ClaimOutcome.COMMITTED, event_id, status=status)


async def test_the_file_uses_wal_and_the_schema_is_recorded_once(path: Path) -> None:
    for _ in range(2):
        await SqliteInbox(path).close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        names = [name for (name,) in conn.execute("SELECT name FROM _sqlite_migrations")]
    finally:
        conn.close()
    assert names == ["0001_inbox", "0002_inbox_committed_index"]


async def test_writes_are_synchronous_full(inbox: SqliteInbox) -> None:
    assert inbox._write.execute("PRAGMA synchronous").fetchone() == (2,)  # 2 = FULL


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda tmp: tmp / "missing-directory" / "inbox.db", "unable to open"),
        (lambda tmp: tmp, "unable to open"),
        (lambda tmp: _garbage(tmp / "not-a-database.db"), "not a database"),
        (lambda tmp: ":memory:", "needs a file path"),
        (lambda tmp: "", "needs a file path"),
    ],
)
def test_an_unusable_location_is_a_configuration_error(
    tmp_path: Path, make: Callable[[Path], Any], expected: str
) -> None:
    with pytest.raises(ConfigurationError, match=expected):
        SqliteInbox(make(tmp_path))


def _garbage(path: Path) -> Path:
    path.write_bytes(b"this is not SQLite, just some bytes " * 200)
    return path


def test_a_non_positive_lease_is_a_configuration_error(path: Path) -> None:
    with pytest.raises(ConfigurationError, match="lease"):
        SqliteInbox(path, lease=timedelta(0))


# -- claims, leases, retention --------------------------------------------------------------------


async def test_many_concurrent_claims_of_one_event_give_exactly_one_claimed(
    inbox: SqliteInbox,
) -> None:
    claims = await asyncio.gather(*(inbox.claim("evt_race") for _ in range(200)))
    outcomes = [claim.outcome for claim in claims]
    assert outcomes.count(ClaimOutcome.CLAIMED) == 1
    assert outcomes.count(ClaimOutcome.IN_FLIGHT) == 199
    record = await inbox.lookup("evt_race")
    assert record is not None
    assert record.deliveries == 200


async def test_two_inboxes_on_one_file_serialise_claims(path: Path, clock: FakeClock) -> None:
    left = SqliteInbox(path, lease=LEASE, clock=clock)
    right = SqliteInbox(path, lease=LEASE, clock=clock)
    try:
        claims = await asyncio.gather(
            *(inbox.claim("evt_shared") for _ in range(40) for inbox in (left, right))
        )
    finally:
        await left.close()
        await right.close()
    assert [c.outcome for c in claims].count(ClaimOutcome.CLAIMED) == 1


async def test_an_expired_lease_is_taken_over_and_the_stale_token_is_refused(
    inbox: SqliteInbox, clock: FakeClock
) -> None:
    first = await inbox.claim("evt_crash")
    clock.advance(LEASE - timedelta(microseconds=1))
    waiting = await inbox.claim("evt_crash")
    assert (waiting.outcome, waiting.retry_after) == (ClaimOutcome.IN_FLIGHT, 1)
    clock.advance(timedelta(microseconds=1))
    second = await inbox.claim("evt_crash")
    assert (second.outcome, second.token, second.taken_over) == (ClaimOutcome.CLAIMED, 2, True)
    assert not await inbox.commit("evt_crash", first.token, 200)
    assert not await inbox.release("evt_crash", first.token)
    assert await inbox.commit("evt_crash", second.token, 200)
    record = await inbox.lookup("evt_crash")
    assert record is not None
    assert (record.effects, record.deliveries, record.token) == (1, 3, 2)


async def test_a_released_claim_is_claimable_at_once(inbox: SqliteInbox) -> None:
    first = await inbox.claim("evt_retry")
    assert await inbox.release("evt_retry", first.token)
    again = await inbox.claim("evt_retry")
    assert (again.outcome, again.token, again.taken_over) == (ClaimOutcome.CLAIMED, 2, False)


async def test_purge_removes_only_records_committed_before_the_cutoff(
    inbox: SqliteInbox, clock: FakeClock
) -> None:
    for event_id in ("evt_old", "evt_cutoff", "evt_new"):
        claim = await inbox.claim(event_id)
        await inbox.commit(event_id, claim.token, 200)
        if event_id == "evt_old":
            clock.advance(timedelta(days=90))
            cutoff = clock()
        clock.advance(timedelta(microseconds=1))
    await inbox.claim("evt_in_flight")
    assert await inbox.purge(cutoff) == 1
    assert await inbox.lookup("evt_old") is None
    for kept in ("evt_cutoff", "evt_new", "evt_in_flight"):
        assert await inbox.lookup(kept) is not None


# -- transactional mode ---------------------------------------------------------------------------


async def test_transactional_work_commits_with_the_record(inbox: SqliteInbox, path: Path) -> None:
    claim = await inbox.claim("evt_tx")
    assert await inbox.commit("evt_tx", claim.token, 200, [effect("a"), effect("b")])
    assert _effects(path) == ["a", "b"]
    stale = await inbox.commit("evt_tx", claim.token, 200, [effect("never")])
    assert stale is False
    assert _effects(path) == ["a", "b"]


async def test_a_failing_work_leaves_no_trace_and_spares_its_batch(
    inbox: SqliteInbox, path: Path
) -> None:
    tokens = {e: (await inbox.claim(e)).token for e in ("evt_ok1", "evt_bad", "evt_ok2")}
    batches_before = inbox.stats.batches
    gate = Gate(inbox)
    await gate.wait_started()
    commits = [
        asyncio.ensure_future(inbox.commit("evt_ok1", tokens["evt_ok1"], 200, [effect("ok1")])),
        asyncio.ensure_future(
            inbox.commit(
                "evt_bad", tokens["evt_bad"], 200, [effect("bad-1"), failing(effect("bad-2"))]
            )
        ),
        asyncio.ensure_future(inbox.commit("evt_ok2", tokens["evt_ok2"], 200, [effect("ok2")])),
    ]
    await _until_queued(inbox, 3)
    await gate.open()
    ok1, bad, ok2 = await asyncio.gather(*commits, return_exceptions=True)
    assert inbox.stats.batches == batches_before + 2, "the three commits shared one batch"
    assert (ok1, ok2) == (True, True)
    assert isinstance(bad, WorkFailure)
    assert _effects(path) == ["ok1", "ok2"]
    record = await inbox.lookup("evt_bad")
    assert record is not None
    assert (record.state, record.effects, record.token) == (RecordState.IN_FLIGHT, 0, 1)
    assert await inbox.release("evt_bad", tokens["evt_bad"])


async def test_async_work_is_refused_without_a_trace(inbox: SqliteInbox, path: Path) -> None:
    claim = await inbox.claim("evt_async")

    async def coroutine_work(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO effects (tag) VALUES ('async')")

    with pytest.raises(InboxError, match="plain function"):
        await inbox.commit("evt_async", claim.token, 200, [effect("first"), coroutine_work])
    assert _effects(path) == []
    assert await inbox.commit("evt_async", claim.token, 200)


async def test_a_work_that_ends_the_transaction_fails_its_batch(inbox: SqliteInbox) -> None:
    claim = await inbox.claim("evt_rogue")

    def rogue(conn: sqlite3.Connection) -> None:
        conn.execute("ROLLBACK")

    with pytest.raises(InboxUnavailable):
        await inbox.commit("evt_rogue", claim.token, 200, [rogue])
    assert (await inbox.claim("evt_after")).outcome is ClaimOutcome.CLAIMED


# -- group commit ---------------------------------------------------------------------------------


async def test_no_answer_before_its_batch_is_committed(inbox: SqliteInbox) -> None:
    first_gate = Gate(inbox)
    await first_gate.wait_started()
    claim = asyncio.ensure_future(inbox.claim("evt_durable"))
    await _until_queued(inbox, 1)
    second_gate = Gate(inbox)  # queued behind the claim: the same batch
    await _until_queued(inbox, 2)
    first_gate.opened.set()
    await second_gate.wait_started()  # the claim ran, its transaction is still open
    await asyncio.sleep(0)
    assert not claim.done()
    assert await inbox.lookup("evt_durable") is None  # readers are not blocked, see no dirt
    await second_gate.open()
    assert (await claim).outcome is ClaimOutcome.CLAIMED
    assert await inbox.lookup("evt_durable") is not None


async def test_concurrent_pairs_share_transactions(inbox: SqliteInbox) -> None:
    async def pair(number: int) -> bool:
        claim = await inbox.claim(f"evt_{number}")
        return await inbox.commit(claim.event_id, claim.token, 200)

    before = inbox.stats
    assert all(await asyncio.gather(*(pair(n) for n in range(300))))
    after = inbox.stats
    inline = after.inline_claims - before.inline_claims  # made while the writer was idle
    assert after.jobs - before.jobs + inline == 600
    assert inline < 10, after  # once pairs overlap, claims queue for the writer like the rest
    assert after.batches - before.batches < 300, after


async def test_a_full_disk_fails_every_job_of_the_batch_then_recovers(
    inbox: SqliteInbox,
) -> None:
    def fill_up(conn: sqlite3.Connection) -> None:
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        conn.execute(f"PRAGMA max_page_count = {pages}")

    gate = Gate(inbox, then=fill_up)
    await gate.wait_started()
    ids = [f"evt_{n:04d}_" + "x" * 200 for n in range(300)]
    claims = [asyncio.ensure_future(inbox.claim(event_id)) for event_id in ids]
    await _until_queued(inbox, len(ids))
    await gate.open()
    results = await asyncio.gather(*claims, return_exceptions=True)
    assert all(isinstance(result, InboxUnavailable) for result in results), results[:3]
    assert "full" in str(results[0])
    assert inbox.stats.failed_batches == 1
    for event_id in ids[:3]:
        assert await inbox.lookup(event_id) is None

    await inbox._submit(lambda conn: conn.execute("PRAGMA max_page_count = 1073741823"))
    assert (await inbox.claim(ids[0])).outcome is ClaimOutcome.CLAIMED


# -- shutdown -------------------------------------------------------------------------------------


async def test_close_drains_pending_jobs_and_is_idempotent(path: Path) -> None:
    inbox = SqliteInbox(path)
    claims = [asyncio.ensure_future(inbox.claim(f"evt_{n}")) for n in range(50)]
    await asyncio.sleep(0)
    await asyncio.gather(inbox.close(), inbox.close())
    assert all(c.result().outcome is ClaimOutcome.CLAIMED for c in claims)
    await inbox.close()
    assert not inbox._writer.is_alive()
    with pytest.raises(InboxUnavailable, match="closed"):
        await inbox.claim("evt_late")
    with pytest.raises(InboxUnavailable, match="closed"):
        await inbox.lookup("evt_0")
    reopened = SqliteInbox(path)
    try:
        assert (await reopened.lookup("evt_49")) is not None
    finally:
        await reopened.close()


async def test_the_event_loop_keeps_running_while_the_writer_is_busy(inbox: SqliteInbox) -> None:
    gate = Gate(inbox)
    await gate.wait_started()
    claim = asyncio.ensure_future(inbox.claim("evt_busy"))
    ticks = 0
    for _ in range(100):
        await asyncio.sleep(0)
        ticks += 1
    assert ticks == 100
    assert not claim.done()
    await gate.open()
    assert (await claim).outcome is ClaimOutcome.CLAIMED


async def test_a_work_failing_on_its_own_constraint_fails_alone(
    inbox: SqliteInbox, path: Path
) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE UNIQUE INDEX effects_once ON effects (tag)")
    conn.close()
    first = await inbox.claim("evt_one")
    second = await inbox.claim("evt_two")
    assert await inbox.commit("evt_one", first.token, 200, [effect("same")])
    with pytest.raises(sqlite3.IntegrityError):
        await inbox.commit("evt_two", second.token, 200, [effect("other"), effect("same")])
    assert _effects(path) == ["same"]
    assert await inbox.commit("evt_two", second.token, 200)


async def test_a_cancelled_callers_claim_is_released_not_left_to_its_lease(
    inbox: SqliteInbox,
) -> None:
    """The claim of a caller cancelled while it was queued still runs (jobs run in order), and,
    made for nobody, is released at once: the next copy of the event claims it, instead of
    being answered "in flight" until the lease expires. The writer goes on unharmed."""
    gate = Gate(inbox)
    await gate.wait_started()
    claim = asyncio.ensure_future(inbox.claim("evt_cancelled"))
    await _until_queued(inbox, 1)
    claim.cancel()
    await gate.open()
    with pytest.raises(asyncio.CancelledError):
        await claim
    await inbox.claim("evt_after")  # jobs run in order: the cancelled one has run by now
    record = await _until_state(inbox, "evt_cancelled", RecordState.RELEASED)
    assert record.token == 1  # it ran, and its own claim was released
    again = await inbox.claim("evt_cancelled")
    assert (again.outcome, again.token) == (ClaimOutcome.CLAIMED, 2)


async def _until_state(inbox: SqliteInbox, event_id: str, state: RecordState) -> InboxRecord:
    """The record once it is in ``state`` (the release runs in a task of its own)."""
    for _ in range(1000):
        record = await inbox.lookup(event_id)
        if record is not None and record.state is state:
            return record
        await asyncio.sleep(0)  # a turn of the loop: the release task moves on
    raise AssertionError(f"{event_id} never reached {state}")


async def test_a_naive_clock_is_refused(path: Path) -> None:
    from datetime import datetime

    inbox = SqliteInbox(path, clock=lambda: datetime(2026, 1, 1))
    try:
        with pytest.raises(InboxError, match="timezone-aware"):
            await inbox.claim("evt_naive")
    finally:
        await inbox.close()


def test_the_user_version_fallback_applies_the_same_schema_once(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from receiver import sqlite_db
    from receiver.inbox import sqlite_schema

    monkeypatch.setattr(sqlite_db, "_migrations_class", lambda: None)
    for _ in range(2):
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            sqlite_schema.apply_migrations(conn)
            assert conn.execute("PRAGMA user_version").fetchone() == (
                len(sqlite_schema.MIGRATIONS),
            )
            tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
        finally:
            conn.close()
        assert "hookproof_inbox" in tables
        assert "_sqlite_migrations" not in tables


async def test_inboxes_opened_at_once_on_a_new_file_share_one_schema(tmp_path: Path) -> None:
    # Replicas starting together: the WAL switch and the migrations race on a new file. Many
    # rounds, because the race (an immediate SQLITE_BUSY on the WAL switch) is won most times.
    for round_number in range(25):
        path = tmp_path / f"new-{round_number}.sqlite"
        inboxes = await asyncio.gather(*(asyncio.to_thread(SqliteInbox, path) for _ in range(4)))
        try:
            claims = await asyncio.gather(*(inbox.claim("evt_shared") for inbox in inboxes))
        finally:
            for inbox in inboxes:
                await inbox.close()
        assert [c.outcome for c in claims].count(ClaimOutcome.CLAIMED) == 1
        conn = sqlite3.connect(path)
        try:
            (applied,) = conn.execute("SELECT count(*) FROM _sqlite_migrations").fetchone()
        finally:
            conn.close()
        assert applied == 2


async def test_commit_batches_are_synchronous_full_after_claim_only_batches(
    inbox: SqliteInbox,
) -> None:
    modes: list[int] = []

    def mode(conn: sqlite3.Connection) -> None:
        modes.append(conn.execute("PRAGMA synchronous").fetchone()[0])

    gate = Gate(inbox)  # the writer is busy: the claim queues for it
    await gate.wait_started()
    claiming = asyncio.ensure_future(inbox.claim("evt_sync"))
    await _until_queued(inbox, 1)
    await gate.open()
    claim = await claiming  # a claim-only batch: NORMAL, no fsync of its own
    assert inbox.stats.inline_claims == 0
    assert inbox._write.execute("PRAGMA synchronous").fetchone() == (1,)  # 1 = NORMAL
    assert await inbox.commit("evt_sync", claim.token, 200, [mode]) is True
    assert modes == [2]  # the commit's batch ran under FULL: its fsync covers the claim too
    assert inbox._write.execute("PRAGMA synchronous").fetchone() == (2,)


def _row(tag: str | None) -> SqliteInsert:
    return SqliteInsert("effects", ("tag",), (tag,))


async def test_a_row_commits_with_the_record_without_a_savepoint(
    inbox: SqliteInbox, path: Path
) -> None:
    claim = await inbox.claim("evt_row")
    statements: list[str] = []
    inbox._write.set_trace_callback(statements.append)
    try:
        assert await inbox.commit("evt_row", claim.token, 201, [_row("kept")]) is True
    finally:
        inbox._write.set_trace_callback(None)
    assert not any("SAVEPOINT" in statement for statement in statements), statements
    assert _effects(path) == ["kept"]
    record = await inbox.lookup("evt_row")
    assert record is not None
    assert (record.state, record.status, record.effects) == (RecordState.COMMITTED, 201, 1)


async def test_a_row_with_a_stale_token_writes_nothing(
    inbox: SqliteInbox, path: Path, clock: FakeClock
) -> None:
    first = await inbox.claim("evt_stale_row")
    clock.advance(LEASE)
    taker = await inbox.claim("evt_stale_row")
    assert await inbox.commit("evt_stale_row", first.token, 200, [_row("stale")]) is False
    assert _effects(path) == []
    assert await inbox.commit("evt_stale_row", taker.token, 200, [_row("taker")]) is True
    assert _effects(path) == ["taker"]


async def test_a_failing_row_fails_alone_and_spares_its_batch(
    inbox: SqliteInbox, path: Path
) -> None:
    one, two = await inbox.claim("evt_r1"), await inbox.claim("evt_r2")
    gate = Gate(inbox)
    await gate.wait_started()
    failing = asyncio.ensure_future(inbox.commit("evt_r1", one.token, 200, [_row(None)]))
    fine = asyncio.ensure_future(inbox.commit("evt_r2", two.token, 200, [_row("fine")]))
    await _until_queued(inbox, 2)
    await gate.open()  # both commits run in one batch behind the gate
    with pytest.raises(sqlite3.IntegrityError):  # NOT NULL: the database's own error, unchanged
        await failing
    assert await fine is True
    assert _effects(path) == ["fine"]
    record = await inbox.lookup("evt_r1")
    assert record is not None
    assert (record.state, record.token, record.effects) == (RecordState.IN_FLIGHT, 1, 0)
    assert await inbox.commit("evt_r1", one.token, 200, [_row("later")]) is True


async def test_a_row_among_other_works_is_a_plain_work(inbox: SqliteInbox, path: Path) -> None:
    claim = await inbox.claim("evt_mixed")
    assert await inbox.commit("evt_mixed", claim.token, 200, [_row("a"), effect("b")]) is True
    assert _effects(path) == ["a", "b"]


def test_a_row_needs_one_value_per_column() -> None:
    with pytest.raises(ConfigurationError):
        SqliteInsert("effects", ("a", "b"), ("only one",))


# -- claims while the writer is idle --------------------------------------------------------------


async def test_a_claim_on_an_idle_inbox_runs_at_once_without_the_writer(inbox: SqliteInbox) -> None:
    before = inbox.stats
    claim = await inbox.claim("evt_idle")
    after = inbox.stats
    assert claim.outcome is ClaimOutcome.CLAIMED
    assert (after.inline_claims, after.jobs, after.batches) == (1, before.jobs, before.batches)
    record = await inbox.lookup("evt_idle")  # written and committed, visible to readers
    assert record is not None
    assert record.state is RecordState.IN_FLIGHT
    duplicate = await inbox.claim("evt_idle")  # the same rules inline: a live lease
    assert duplicate.outcome is ClaimOutcome.IN_FLIGHT
    assert await inbox.commit("evt_idle", claim.token, 200)
    again = await inbox.claim("evt_idle")
    assert (again.outcome, again.status) == (ClaimOutcome.COMMITTED, 200)
    record = await inbox.lookup("evt_idle")
    assert record is not None
    assert record.deliveries == 3


async def test_the_inline_connection_never_waits_for_a_lock_nor_checkpoints(
    inbox: SqliteInbox,
) -> None:
    assert inbox._inline.execute("PRAGMA busy_timeout").fetchone() == (0,)
    assert inbox._inline.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    assert inbox._inline.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL, as batches


async def test_a_claim_while_another_process_holds_the_file_goes_to_the_writer(
    inbox: SqliteInbox, path: Path
) -> None:
    other = sqlite3.connect(path, isolation_level=None)  # as another process would
    other.execute("BEGIN IMMEDIATE")
    try:
        claiming = asyncio.ensure_future(inbox.claim("evt_locked"))
        await _until_queued(inbox, 1)  # not run inline: it waits in the writer's queue
        for _ in range(20):
            await asyncio.sleep(0)  # the event loop is not blocked by the lock
        assert not claiming.done()
    finally:
        other.execute("COMMIT")
        other.close()
    assert (await claiming).outcome is ClaimOutcome.CLAIMED
    assert inbox.stats.inline_claims == 0


async def test_a_claim_never_overtakes_one_queued_before_it(inbox: SqliteInbox) -> None:
    gate = Gate(inbox)
    await gate.wait_started()
    first = asyncio.ensure_future(inbox.claim("evt_order"))
    await _until_queued(inbox, 1)
    second = asyncio.ensure_future(inbox.claim("evt_order"))  # the writer is busy: it queues
    await _until_queued(inbox, 2)
    await gate.open()
    outcomes = [(await first).outcome, (await second).outcome]
    assert outcomes == [ClaimOutcome.CLAIMED, ClaimOutcome.IN_FLIGHT]
    assert inbox.stats.inline_claims == 0


async def test_a_claim_after_close_is_unavailable(path: Path, clock: FakeClock) -> None:
    closed = SqliteInbox(path, lease=LEASE, clock=clock)
    await closed.close()
    with pytest.raises(InboxUnavailable):
        await closed.claim("evt_closed")


# -- reads ----------------------------------------------------------------------------------------


async def test_fetch_one_reads_the_applications_tables_next_to_the_inbox(
    inbox: SqliteInbox, path: Path
) -> None:
    claim = await inbox.claim("evt_read")
    assert await inbox.commit("evt_read", claim.token, 200, [effect("one")])
    assert await inbox.fetch_one("SELECT count(*) FROM effects WHERE tag = ?", ("one",)) == (1,)
    assert await inbox.fetch_one("SELECT tag FROM effects WHERE tag = 'none'") is None


async def test_fetch_one_refuses_a_query_that_would_write(inbox: SqliteInbox, path: Path) -> None:
    with pytest.raises(InboxUnavailable, match="readonly"):
        await inbox.fetch_one("INSERT INTO effects (tag) VALUES ('sneaky')")
    assert _effects(path) == []


class _LockedConnection:
    """Stands in for the at-once read connection while another process holds the file in a way
    that even a WAL reader must wait for (WAL recovery, an exclusive locking mode)."""

    def __init__(self, real: sqlite3.Connection) -> None:
        self.real = real
        self.refused = 0

    def execute(self, sql: str, parameters: Any = ()) -> Any:
        self.refused += 1
        raise sqlite3.OperationalError("database is locked")

    def close(self) -> None:
        self.real.close()


async def test_a_read_that_meets_a_lock_moves_to_the_reader_thread(inbox: SqliteInbox) -> None:
    claim = await inbox.claim("evt_seen")
    assert await inbox.commit("evt_seen", claim.token, 200)
    threads: list[str] = []
    original = inbox._read_one

    def on_reader_thread(sql: str, parameters: Any) -> Any:
        threads.append(threading.current_thread().name)
        return original(sql, parameters)

    inbox._read_one = on_reader_thread  # type: ignore[method-assign]
    locked = _LockedConnection(inbox._peek)
    inbox._peek = locked  # type: ignore[assignment]
    record = await inbox.lookup("evt_seen")
    assert record is not None
    assert record.state is RecordState.COMMITTED
    assert locked.refused == 1
    assert len(threads) == 1
    assert threads[0].startswith("hookproof-inbox-reader")


async def test_a_read_runs_at_once_when_no_other_read_is_running(inbox: SqliteInbox) -> None:
    claim = await inbox.claim("evt_now")
    assert await inbox.commit("evt_now", claim.token, 200)
    inbox._reader.shutdown(wait=True)  # the reader thread is gone: only an at-once read works
    record = await inbox.lookup("evt_now")
    assert record is not None
    assert record.status == 200


@pytest.mark.parametrize(("columns", "values"), [((), ()), (("a", "b"), (1,))])
def test_a_row_needs_one_value_per_column_in_every_backend(
    columns: tuple[str, ...], values: tuple[object, ...]
) -> None:
    from receiver.inbox.postgres import PostgresInsert

    for kind in (SqliteInsert, PostgresInsert):
        with pytest.raises(ConfigurationError, match=f"{kind.__name__} needs one value per column"):
            kind("effects", columns, values)
