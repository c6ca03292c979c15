"""The PostgreSQL inbox: one shared ``event_id`` inbox for several receiver replicas (psycopg 3).

It implements :mod:`receiver.inbox.contract` on one table (its schema is in
:mod:`receiver.inbox.postgres_schema`, migrated by the backend itself at
:meth:`PostgresInbox.connect`):

- **claim** is one ``INSERT … ON CONFLICT DO UPDATE`` statement. The row lock PostgreSQL takes on
  conflict serialises concurrent claims of one event, across processes and hosts: the first one
  inserts (``CLAIMED``), the others see its live lease (``IN_FLIGHT``). A claim whose lease expired
  is taken over in the same statement by a compare-and-set on the stored state and lease, with the
  fencing token incremented. Lease expiry is compared against the injected clock's value, passed
  as a parameter: the database's own ``now()`` is never consulted, so tests control expiry.
- **commit** is one transaction: a compare-and-set ``UPDATE`` on the token (which also locks the
  row), then every transactional ``work`` callable with the transaction's
  :class:`psycopg.AsyncConnection` (sync or coroutine functions), then ``COMMIT``. A stale token
  changes nothing and runs no work; a work that raises rolls back its own writes and the inbox
  record alike (the record stays in flight with the caller's token, exactly as in
  :class:`~receiver.inbox.memory.MemoryInbox`) and its exception propagates unchanged.
- **two round trips per delivery**: the claim is one statement, and so is a commit without work
  or whose works are all :class:`PostgresInsert` rows (the reference app's demo effect): the
  inserts become data-modifying CTEs that select from the compare-and-set ``UPDATE``, so they
  write exactly when the token is current, and the one statement is its own durable transaction
  (no ``BEGIN``/``COMMIT`` round trips). Other works take the transaction above.
- **one statement for many deliveries**: the limit of a busy replica is its own CPU per statement
  (the pool, psycopg's execute), so concurrent deliveries share their statements
  (:mod:`receiver.inbox.postgres_batch`, like the SQLite inbox's group commit): the claims
  submitted while a batch is prepared or in flight form the next batch, one ``INSERT … SELECT …
  ON CONFLICT DO UPDATE`` for all of them, and so do the one-statement commits (one
  compare-and-set ``UPDATE … FROM (VALUES …)``, their rows grouped per table as in
  :mod:`receiver.inbox.postgres_rows`). An idle inbox starts an operation on the next turn of the
  event loop; at most two batches of a kind run at once (each on one pooled connection), at most
  256 operations each. Two operations on one event never share a batch (the second waits for the
  first one's answer: claims of one event keep their order), and every batch locks its rows in
  event-id order, so batches of two replicas cannot deadlock. Every caller is answered from its
  own batch's result only: a lost database fails every caller of the batch with
  :class:`~receiver.exceptions.InboxUnavailable`; a batch's commit statement, like one
  delivery's statement with rows, waits at most 1 ms for a lock, then leaves each of its commits
  to an explicit transaction whose ``COMMIT`` only a live replica sends (a replica killed while
  its commit waits leaves nothing committed); a batch statement that fails for one delivery's
  reason (a row its table refuses) is redone delivery by delivery, so only that one fails, with
  its own error. Releases (rare: a handler failed) stay one statement each.
  :attr:`PostgresInbox.stats` counts the batches. A claim batch of several never waits for a
  row lock either (1 ms): if another session holds one of its events (that event's commit
  transaction running callable work, say), each of its claims is made again on its own, so only
  that one waits, as it did unbatched.
- **durability**: ``commit`` returns only after PostgreSQL acknowledged ``COMMIT`` under the
  server's ``synchronous_commit`` (keep it ``on`` or stronger: the 2xx promises durability).
  Claims and releases commit without waiting for the WAL flush (see ``_NOT_DURABLE``): losing
  one in a database crash is harmless, and it halves the fsyncs per delivery.

Connections come from a :class:`psycopg_pool.AsyncConnectionPool` (no blocking call on the event
loop). A connection that sat idle is checked before it is handed out, and the whole pool is
re-checked after a failure, so connections killed under the receiver (``pg_terminate_backend``, a
server restart) are replaced instead of failing request after request. An unreachable or
misconfigured database is one :class:`~receiver.exceptions.ConfigurationError` from
:meth:`PostgresInbox.connect`; a database that goes away later turns operations into
:class:`~receiver.exceptions.InboxUnavailable` (503 with ``Retry-After``), and the pool reconnects
by itself when the server is back.

**Location.** A libpq URL, ``postgresql://`` or ``postgres://``, with every libpq parameter
(``application_name``, ``sslmode``, ``options`` …) plus these hookproof parameters, removed before
libpq sees the URL:

``schema``
    The schema holding the inbox (created if missing; default ``public``). Pool connections get
    ``search_path = <schema>, public`` so transactional work with unqualified table names writes
    next to the inbox. Instead of it, a libpq ``options=-csearch_path%3D<schema>`` is honoured too:
    its first schema holds the inbox. The ``schema=`` argument of :meth:`~PostgresInbox.connect`
    wins over both.
``pool_min_size`` / ``pool_max_size``
    Connections kept open / at most (default 1 / 10 per replica).
``pool_timeout``
    Seconds an operation waits for a free connection before answering
    :class:`~receiver.exceptions.InboxUnavailable` (default 5).
``pool_reconnect_timeout``
    Seconds the pool keeps retrying (with backoff) to replace one lost connection before it gives
    that slot up and starts afresh on the next request (default 2). Short, so that the backoff
    never grows long during an outage: the inbox is back within about this long after the
    database is.

psycopg is an optional dependency (``pip install 'hookproof[postgres]'``); it is imported only when
this backend connects, and its absence is a :class:`~receiver.exceptions.ConfigurationError`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from receiver.clock import ClockInput, datetime_source
from receiver.exceptions import ConfigurationError, InboxError, InboxUnavailable
from receiver.inbox.contract import (
    DEFAULT_LEASE,
    Claim,
    ClaimOutcome,
    Inbox,
    InboxRecord,
    RecordState,
    TransactionalWork,
    retry_after_seconds,
    utc_now,
)
from receiver.inbox.orphans import OrphanedClaims
from receiver.inbox.postgres_batch import Batcher, BatchStats, Failed, Later
from receiver.inbox.postgres_rows import PostgresInsert, grouped_inserts
from receiver.inbox.postgres_schema import INBOX_TABLE, migrate

if TYPE_CHECKING:
    from psycopg import AsyncConnection, AsyncCursor
    from psycopg.sql import Composed
    from psycopg_pool import AsyncConnectionPool

__all__ = [
    "PostgresBatchStats",
    "PostgresInbox",
    "PostgresInsert",
    "PostgresLocation",
    "parse_location",
]

DEFAULT_APPLICATION_NAME = "hookproof-receiver"
DEFAULT_POOL_MIN_SIZE = 1
DEFAULT_POOL_MAX_SIZE = 10
DEFAULT_POOL_TIMEOUT_S = 5.0
DEFAULT_POOL_RECONNECT_TIMEOUT_S = 2.0
DEFAULT_CONNECT_TIMEOUT_S = 10.0
DEFAULT_CHECK_IDLE_AFTER_S = 1.0
RETRY_AFTER_UNAVAILABLE_S = 1
"""What :class:`InboxUnavailable` suggests as ``Retry-After`` (the middleware decides)."""

_SCHEMES = ("postgresql", "postgres")
_HOOKPROOF_PARAMETERS = frozenset(
    {"schema", "pool_min_size", "pool_max_size", "pool_timeout", "pool_reconnect_timeout"}
)
_SEARCH_PATH_OPTION = re.compile(r"(?:^|\s)-c\s*search_path\s*=\s*([^,\s]+)")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}$")

_COLUMNS = (
    "event_id, state, token, deliveries, effects, status,"
    " lease_expires_at, created_at, committed_at"
)
_CLAIMABLE = "(r.state = 'released' OR (r.state = 'in_flight' AND r.lease_expires_at <= %(now)s))"
_CLAIM_SQL = f"""
INSERT INTO {{table}} AS r ({_COLUMNS}, last_claim)
SELECT claimed.event_id, 'in_flight', 1, 1, 0, NULL, %(expires)s, %(now)s, NULL, 'claimed'
FROM json_array_elements_text(%(event_ids)s::json) AS claimed(event_id)
ON CONFLICT (event_id) DO UPDATE SET
    deliveries = r.deliveries + 1,
    last_claim = CASE
        WHEN r.state = 'committed' THEN 'committed'
        WHEN r.state = 'released' THEN 'claimed'
        WHEN r.lease_expires_at > %(now)s THEN 'in_flight'
        ELSE 'taken_over' END,
    token = CASE WHEN {_CLAIMABLE} THEN r.token + 1 ELSE r.token END,
    lease_expires_at = CASE WHEN {_CLAIMABLE} THEN %(expires)s ELSE r.lease_expires_at END,
    state = CASE WHEN r.state = 'committed' THEN 'committed' ELSE 'in_flight' END
RETURNING r.event_id, last_claim, token, status, lease_expires_at, {{not_durable}}
"""
"""The claims of one batch (distinct event ids, as a JSON array, sorted: every batch locks its
rows in the same order, so two replicas' batches cannot deadlock)."""
_COMMIT_SQL = """
UPDATE {table} SET state = 'committed', status = %(status)s, effects = effects + 1,
    lease_expires_at = NULL, committed_at = %(now)s
WHERE event_id = %(event_id)s AND token = %(token)s AND state = 'in_flight'
RETURNING event_id
"""
_FOLDED_SQL = (
    "SET LOCAL lock_timeout = {lock_timeout};\n"
    "WITH done AS ({update}){inserts}\nSELECT count(*) FROM done"
)
"""A commit whose works are rows to insert, as one statement: each insert selects its row from
``done`` (the compare-and-set), so a stale token inserts nothing."""
_FOLDED_LOCK_TIMEOUT = "1ms"
"""How long a one-statement commit may wait for a lock before it becomes a transaction."""
_BATCH_COMMIT_SQL = b"""SET LOCAL lock_timeout = '%b';
WITH done AS (UPDATE %b AS r SET state = 'committed', status = c.status, effects = r.effects + 1,
    lease_expires_at = NULL, committed_at = %b
FROM (VALUES %b) AS c(event_id, token, status)
WHERE r.event_id = c.event_id AND r.token = c.token AND r.state = 'in_flight'
RETURNING r.event_id)%b
SELECT event_id FROM done"""
"""The commits of one batch (distinct event ids, sorted) as one statement: the compare-and-set of
every record, then the rows of :func:`~receiver.inbox.postgres_rows.grouped_inserts`; it returns
the event ids whose token was current."""
_RELEASE_SQL = """
UPDATE {table} SET state = 'released'
WHERE event_id = %(event_id)s AND token = %(token)s AND state = 'in_flight'
RETURNING event_id, {not_durable}
"""
_NOT_DURABLE = "set_config('synchronous_commit', 'off', true)"
"""Evaluated in a statement's RETURNING: that statement's own (implicit) transaction commits
without waiting for the WAL flush. Only for claims and releases, which may be lost in a database
crash without harm: a lost claim is claimed again by the retry, a lost release expires with its
lease, and the WAL is flushed in order, so a later durable commit makes them durable too. Every
``commit`` keeps the server's setting (``on``): its 2xx promises durability."""
_LOOKUP_SQL = f"SELECT {_COLUMNS} FROM {{table}} WHERE event_id = %(event_id)s"
_PURGE_SQL = """
WITH purged AS (
    DELETE FROM {table} WHERE committed_at IS NOT NULL AND committed_at < %(cutoff)s
    RETURNING 1
)
SELECT count(*) FROM purged
"""


@dataclass(frozen=True)
class PostgresLocation:
    """A parsed inbox location: what libpq gets, what hookproof keeps, and a password-free name."""

    conninfo: str
    schema: str
    set_search_path: bool
    """Whether pool connections need ``SET search_path`` (not when ``options`` already sets it)."""
    application_name: str | None
    pool_min_size: int
    pool_max_size: int
    pool_timeout: float
    pool_reconnect_timeout: float
    display: str
    """``postgresql://user@host:port/dbname``, never with a password: safe for errors and logs."""
    password: str | None


def parse_location(location: str, *, schema: str | None = None) -> PostgresLocation:
    """Split a ``postgresql://`` location into libpq's conninfo and hookproof's own parameters."""
    from psycopg.conninfo import conninfo_to_dict

    parts = urlsplit(location)
    if parts.scheme not in _SCHEMES:
        raise ConfigurationError(
            f"a PostgreSQL inbox location starts with postgresql:// (got {parts.scheme or '?'}://)"
        )
    ours: dict[str, str] = {}
    theirs: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in _HOOKPROOF_PARAMETERS:
            ours[key] = value
        else:
            theirs.append((key, value))
    conninfo = urlunsplit(parts._replace(query=urlencode(theirs)))
    try:
        params = conninfo_to_dict(conninfo)
    except Exception as exc:  # psycopg.ProgrammingError: an unknown or malformed parameter
        raise ConfigurationError(f"invalid PostgreSQL inbox location: {_first_line(exc)}") from exc
    password = params.get("password")
    display = _display(params)
    options_path = _SEARCH_PATH_OPTION.search(str(params.get("options") or ""))
    chosen = schema or ours.get("schema")
    set_search_path = True
    if not chosen and options_path:
        chosen, set_search_path = options_path.group(1).strip('"'), False
    chosen = chosen or "public"
    if not _IDENTIFIER.match(chosen):
        raise ConfigurationError(
            f"invalid inbox schema name {chosen!r}: letters, digits, _ and $, at most 63"
        )
    return PostgresLocation(
        conninfo=conninfo,
        schema=chosen,
        set_search_path=set_search_path,
        application_name=None if "application_name" in params else DEFAULT_APPLICATION_NAME,
        pool_min_size=_number(ours, "pool_min_size", DEFAULT_POOL_MIN_SIZE, int, minimum=0),
        pool_max_size=_number(ours, "pool_max_size", DEFAULT_POOL_MAX_SIZE, int, minimum=1),
        pool_timeout=_number(ours, "pool_timeout", DEFAULT_POOL_TIMEOUT_S, float, minimum=0.001),
        pool_reconnect_timeout=_number(
            ours, "pool_reconnect_timeout", DEFAULT_POOL_RECONNECT_TIMEOUT_S, float, minimum=0.001
        ),
        display=display,
        password=str(password) if password else None,
    )


class PostgresInbox(Inbox):
    """The inbox in one PostgreSQL table, shared by every replica that connects to it.

    Create it with :meth:`connect`, never directly.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        location: PostgresLocation,
        *,
        lease: timedelta,
        clock: ClockInput,
        used_at: weakref.WeakKeyDictionary[AsyncConnection[Any], float] | None = None,
    ) -> None:
        from psycopg import sql

        self.lease = lease
        self._clock = datetime_source(clock)
        self._pool = pool
        self._location = location
        self._closing = False
        self._closed = False
        self._check_task: asyncio.Task[None] | None = None
        self._used_at = used_at if used_at is not None else weakref.WeakKeyDictionary()
        table = sql.SQL("{}.{}").format(
            sql.Identifier(location.schema), sql.Identifier(INBOX_TABLE)
        )
        not_durable = sql.SQL(_NOT_DURABLE)
        self._claim_sql = sql.SQL(_CLAIM_SQL).format(table=table, not_durable=not_durable)
        self._claim_batch_sql = (
            sql.SQL("SET LOCAL lock_timeout = {};\n").format(sql.Literal(_FOLDED_LOCK_TIMEOUT))
            + self._claim_sql
        )
        self._commit_sql = sql.SQL(_COMMIT_SQL).format(table=table)
        self._folded_update = sql.SQL(_COMMIT_SQL.strip()).format(table=table)
        self._release_sql = sql.SQL(_RELEASE_SQL).format(table=table, not_durable=not_durable)
        self._lookup_sql = sql.SQL(_LOOKUP_SQL).format(table=table)
        self._purge_sql = sql.SQL(_PURGE_SQL).format(table=table)
        self._table = table.as_bytes(None)
        closed = "the PostgreSQL inbox is closed"
        self._orphans = OrphanedClaims(self.release)
        self._claims: Batcher[str, Claim] = Batcher(
            self._claim_batch, closed=closed, orphaned=self._orphans.landed
        )
        self._commits: Batcher[_Commit, bool] = Batcher(self._commit_batch, closed=closed)

    @classmethod
    async def connect(
        cls,
        location: str,
        *,
        lease: timedelta = DEFAULT_LEASE,
        clock: ClockInput = utc_now,
        schema: str | None = None,
        check_idle_after: float | None = DEFAULT_CHECK_IDLE_AFTER_S,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
    ) -> PostgresInbox:
        """Reach the database, migrate the schema, open the pool; or one clear ConfigurationError.

        ``check_idle_after``: a pooled connection that sat idle longer than this many seconds is
        checked (one round trip) before it is handed out, so a connection killed while nobody
        used it (a database restart at night) never fails a request; connections in steady use
        skip the check. ``0`` checks every time, ``None`` never.
        """
        if lease <= timedelta(0):
            raise ConfigurationError("the inbox lease must be positive")
        _require_psycopg()
        import psycopg
        from psycopg_pool import AsyncConnectionPool

        parsed = parse_location(location, schema=schema)
        kwargs: dict[str, Any] = {"autocommit": True}
        if parsed.application_name is not None:
            kwargs["application_name"] = parsed.application_name
        try:
            first = await asyncio.wait_for(
                psycopg.AsyncConnection.connect(
                    parsed.conninfo, connect_timeout=max(1, int(connect_timeout)), **kwargs
                ),
                timeout=connect_timeout,
            )
        except (psycopg.Error, OSError, TimeoutError) as exc:
            raise ConfigurationError(
                f"cannot reach the PostgreSQL inbox at {parsed.display}: {_reason(exc, parsed)}"
            ) from exc
        try:
            await migrate(first, parsed.schema)
        except psycopg.Error as exc:
            raise ConfigurationError(
                f"cannot prepare the PostgreSQL inbox schema {parsed.schema!r} at "
                f"{parsed.display}: {_reason(exc, parsed)}"
            ) from exc
        finally:
            await first.close()

        configure = _search_path_setter(parsed.schema) if parsed.set_search_path else None
        used_at: weakref.WeakKeyDictionary[AsyncConnection[Any], float] = (
            weakref.WeakKeyDictionary()
        )
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            parsed.conninfo,
            kwargs=kwargs,
            min_size=min(parsed.pool_min_size, parsed.pool_max_size),
            max_size=parsed.pool_max_size,
            open=False,
            configure=configure,
            check=None if check_idle_after is None else _IdleCheck(check_idle_after, used_at),
            timeout=parsed.pool_timeout,
            reconnect_timeout=parsed.pool_reconnect_timeout,
            name=f"hookproof-inbox-{parsed.schema}",
        )
        try:
            await pool.open(wait=True, timeout=connect_timeout)
        except psycopg.Error as exc:
            await pool.close()
            raise ConfigurationError(
                f"cannot open connections to the PostgreSQL inbox at {parsed.display}: "
                f"{_reason(exc, parsed)}"
            ) from exc
        return cls(pool, parsed, lease=lease, clock=clock, used_at=used_at)

    @property
    def schema(self) -> str:
        """The schema holding the inbox table."""
        return self._location.schema

    @property
    def display(self) -> str:
        """The database, named without its password."""
        return self._location.display

    @property
    def stats(self) -> PostgresBatchStats:
        """How well claims and commits are being batched so far."""
        return PostgresBatchStats(self._claims.stats, self._commits.stats)

    async def claim(self, event_id: str) -> Claim:
        future = self._claims.submit(event_id, event_id)
        try:
            return await future
        except asyncio.CancelledError:
            self._orphans.cancelled(future)
            raise

    async def _claim_batch(self, event_ids: list[str]) -> list[Claim | Failed | Later[Claim]]:
        """One statement for the claims of one batch (distinct event ids).

        A batch of several never waits for a row lock (``lock_timeout`` of
        :data:`_FOLDED_LOCK_TIMEOUT`, local to the statement's implicit transaction): if another
        session holds one of its events (that event's commit transaction running its work, say),
        every claim is made again on its own, so only that one waits, as it would unbatched.
        """
        import psycopg

        now = self._now()
        params = {
            "event_ids": json.dumps(sorted(event_ids)),
            "now": now,
            "expires": now + self.lease,
        }
        rows: list[Any] | None
        if len(event_ids) == 1:
            async with self._connection() as conn:
                cursor = await self._execute(conn, self._claim_sql, params)
                rows = await cursor.fetchall()
        else:
            async with self._connection() as conn:
                # Client-side binding: SET LOCAL and the claims in one message, one transaction.
                batch = psycopg.AsyncClientCursor(conn)
                try:
                    await batch.execute(self._claim_batch_sql, params)
                except psycopg.errors.LockNotAvailable:
                    rows = None  # (an OperationalError: caught before _connection sees it)
                except psycopg.OperationalError:
                    raise  # a lost database: every caller of the batch raises
                except psycopg.Error:
                    # The statement failed for a reason of one claim (an event id PostgreSQL
                    # refuses): each claim again on its own, so only the guilty one fails.
                    rows = None
                else:
                    batch.nextset()
                    rows = await batch.fetchall()
        if rows is None:
            return [Later(self._claim_batch_of_one(event_id)) for event_id in event_ids]
        found = {row[0]: row for row in rows}
        if len(found) != len(event_ids):  # pragma: no cover - every row is inserted or updated
            raise InboxError(f"claiming {len(event_ids)} events returned {len(found)} rows")
        return [_claim(event_id, found[event_id], now) for event_id in event_ids]

    async def _claim_batch_of_one(self, event_id: str) -> Claim:
        (outcome,) = await self._claim_batch([event_id])
        assert isinstance(outcome, Claim)
        return outcome

    async def commit(
        self,
        event_id: str,
        token: int,
        status: int,
        work: Sequence[TransactionalWork] = (),
    ) -> bool:
        works = tuple(work)
        if all(type(item) is PostgresInsert for item in works):  # one statement: batched
            commit = _Commit(event_id, token, status, works)  # type: ignore[arg-type]
            return await self._commits.submit(event_id, commit)
        params = {"event_id": event_id, "token": token, "status": status, "now": self._now()}
        return await self._commit_in_transaction(params, works)

    async def _commit_batch(self, commits: list[_Commit]) -> list[bool | Failed | Later[bool]]:
        """The commits of one batch (distinct event ids): one statement for one commit or many.

        A statement that would wait for a lock leaves its commits to explicit transactions, each
        on its own (:meth:`_commit_folded`); a batch statement that fails for another reason than
        the database's (a row one delivery inserts breaks a constraint, say) is redone delivery by
        delivery, so only the guilty one fails, with its own exception.
        """
        now = self._now()
        if len(commits) == 1:
            (commit,) = commits
            done = await self._commit_statement(commit, now)
            return [Later(self._commit_waiting(commit, now)) if done is None else done]
        try:
            committed = await self._commit_together(commits, now)
        except _BatchRefused:
            return [Later(self._commit_alone(commit)) for commit in commits]
        if committed is None:
            return [Later(self._commit_waiting(commit, now)) for commit in commits]
        return [commit.event_id in committed for commit in commits]

    async def _commit_alone(self, commit: _Commit) -> bool:
        """One delivery's commit: its one statement, or the transaction if that would wait."""
        now = self._now()
        done = await self._commit_statement(commit, now)
        return await self._commit_waiting(commit, now) if done is None else done

    async def _commit_statement(self, commit: _Commit, now: datetime) -> bool | None:
        """One delivery's commit as one statement (its own, durable, transaction); ``None`` if
        it would wait for a lock (rows to insert only: see :meth:`_commit_folded`)."""
        params = commit.params(now)
        if not commit.inserts:
            async with self._connection() as conn:
                return await self._fetchone(conn, self._commit_sql, params) is not None
        return await self._commit_folded(params, commit.inserts)

    def _commit_waiting(self, commit: _Commit, now: datetime) -> Awaitable[bool]:
        return self._commit_in_transaction(commit.params(now), commit.inserts)

    async def _commit_in_transaction(
        self, params: dict[str, Any], works: Sequence[TransactionalWork]
    ) -> bool:
        """``BEGIN``, the compare-and-set, every work with the connection, ``COMMIT``."""
        async with self._connection() as conn:
            try:
                async with conn.transaction():
                    row = await self._fetchone(conn, self._commit_sql, params)
                    if row is None:
                        raise _StaleToken
                    for item in works:
                        result = item(conn)
                        if inspect.isawaitable(result):
                            await result
            except _StaleToken:
                return False
        return True

    async def _commit_folded(
        self, params: dict[str, Any], inserts: Sequence[PostgresInsert]
    ) -> bool | None:
        """The compare-and-set and every insert in one statement: one durable round trip; or
        ``None`` if the statement would have waited for a lock. An insert that fails fails the
        statement, so nothing is kept and its error is raised unchanged (as a work's error is).

        The statement never waits for a lock (``lock_timeout`` of :data:`_FOLDED_LOCK_TIMEOUT`,
        local to its implicit transaction): a commit that would wait — another session holds the
        row or the effect's table — is done as an explicit transaction instead, whose ``COMMIT``
        only a live replica sends. So a replica killed while its commit waits leaves nothing
        committed, exactly as before the fold.
        """
        import psycopg
        from psycopg import sql

        folded_params = dict(params)
        statement = sql.SQL(_FOLDED_SQL).format(
            lock_timeout=sql.Literal(_FOLDED_LOCK_TIMEOUT),
            update=self._folded_update,
            inserts=sql.SQL("").join(
                item.folded(f"w{n}", folded_params) for n, item in enumerate(inserts)
            ),
        )
        async with self._connection() as conn:
            # Client-side binding: two statements (SET LOCAL, then the commit) in one message,
            # run as one implicit transaction.
            cursor = psycopg.AsyncClientCursor(conn)
            try:
                await cursor.execute(statement, folded_params)
            except psycopg.errors.LockNotAvailable:
                return None  # (an OperationalError: caught here, before _connection sees it)
            cursor.nextset()
            row = await cursor.fetchone()
        return row is not None and row[0] == 1

    async def _commit_together(self, commits: list[_Commit], now: datetime) -> set[str] | None:
        """Several deliveries' commits in one statement (:data:`_BATCH_COMMIT_SQL`): the event
        ids committed, or ``None`` if the statement would have waited for a lock (the same rule
        as :meth:`_commit_folded`). :class:`_BatchRefused` if it failed for another reason than
        a lost database."""
        import psycopg
        from psycopg.adapt import Transformer

        async with self._connection() as conn:
            cursor = psycopg.AsyncClientCursor(conn)
            try:
                literal = Transformer.from_context(conn).as_literal
                records: list[bytes] = []
                rows: list[tuple[bytes, PostgresInsert]] = []
                for commit in sorted(commits, key=_event_id):  # rows in one order, always
                    key = literal(commit.event_id)
                    token, status = literal(commit.token), literal(commit.status)
                    records.append(b"(%b, %b, %b)" % (key, token, status))
                    rows.extend((key, row) for row in commit.inserts)
                statement = _BATCH_COMMIT_SQL % (
                    _FOLDED_LOCK_TIMEOUT.encode(),
                    self._table,
                    literal(now),
                    b", ".join(records),
                    grouped_inserts(rows, literal),
                )
                await cursor.execute(statement.decode(conn.info.encoding))
            except psycopg.errors.LockNotAvailable:
                return None
            except psycopg.OperationalError:
                raise  # the database is lost: InboxUnavailable for every caller
            except psycopg.Error as error:
                raise _BatchRefused from error
            cursor.nextset()
            return {event_id for (event_id,) in await cursor.fetchall()}

    async def release(self, event_id: str, token: int) -> bool:
        params = {"event_id": event_id, "token": token}
        async with self._connection() as conn:
            row = await self._fetchone(conn, self._release_sql, params)
        return row is not None

    async def lookup(self, event_id: str) -> InboxRecord | None:
        async with self._connection() as conn:
            row = await self._fetchone(conn, self._lookup_sql, {"event_id": event_id})
        if row is None:
            return None
        (
            found_id,
            state,
            token,
            deliveries,
            effects,
            status,
            lease_expires_at,
            created_at,
            committed_at,
        ) = row
        return InboxRecord(
            event_id=found_id,
            state=RecordState(state),
            token=token,
            deliveries=deliveries,
            effects=effects,
            status=status,
            lease_expires_at=_utc(lease_expires_at),
            created_at=created_at.astimezone(UTC),
            committed_at=_utc(committed_at),
        )

    async def purge(self, committed_before: datetime) -> int:
        if committed_before.tzinfo is None:
            raise InboxError("purge needs a timezone-aware cutoff")
        async with self._connection() as conn:
            row = await self._fetchone(conn, self._purge_sql, {"cutoff": committed_before})
        assert row is not None
        return int(row[0])

    async def close(self) -> None:
        """Let every claim and commit already submitted finish, then close the pool."""
        if self._closing:
            return
        self._closing = True
        await self._claims.drain()
        await self._orphans.drain()  # a cancelled caller's claim is released before the end
        await self._commits.drain()
        self._closed = True
        if self._check_task is not None:
            self._check_task.cancel()
            await asyncio.gather(self._check_task, return_exceptions=True)
        await self._pool.close()

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None:
            raise InboxError("the inbox clock must return timezone-aware datetimes")
        return now

    def connection(self) -> AbstractAsyncContextManager[AsyncConnection[Any]]:
        """A pooled connection to the inbox's database, its ``search_path`` on the inbox's schema.

        For the application's own statements next to the inbox (reads, or writes that need not
        commit with an event — for those, use the transactional ``work`` of :meth:`commit`). A
        lost database becomes :class:`InboxUnavailable`, as for the inbox's own operations.
        """
        return self._connection()

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        """A pooled connection; a lost database becomes :class:`InboxUnavailable`."""
        import psycopg

        if self._closed:
            raise InboxUnavailable("the PostgreSQL inbox is closed")
        try:
            async with self._pool.connection() as conn:
                try:
                    yield conn
                finally:
                    self._used_at[conn] = time.monotonic()
        except psycopg.OperationalError as exc:  # lost connection, shutdown, pool timeout …
            self._recheck_pool()
            raise InboxUnavailable(
                f"the PostgreSQL inbox at {self._location.display} is unavailable: "
                f"{_reason(exc, self._location)}"
            ) from exc

    async def _fetchone(
        self, conn: AsyncConnection[Any], query: Composed, params: dict[str, Any]
    ) -> tuple[Any, ...] | None:
        """One of the inbox's own statements, its first row (see :meth:`_execute`)."""
        cursor = await self._execute(conn, query, params)
        row: tuple[Any, ...] | None = await cursor.fetchone()
        return row

    async def _execute(
        self, conn: AsyncConnection[Any], query: Composed, params: dict[str, Any]
    ) -> AsyncCursor[Any]:
        """Run one of the inbox's own statements; its non-connection errors become InboxError."""
        import psycopg

        try:
            return await conn.execute(query, params)
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:
            raise InboxError(
                f"the PostgreSQL inbox in schema {self._location.schema!r} at "
                f"{self._location.display} failed: {_reason(exc, self._location)}"
            ) from exc

    def _recheck_pool(self) -> None:
        """After a failure, test every idle connection in the background and replace dead ones."""
        if self._closed or (self._check_task is not None and not self._check_task.done()):
            return
        self._check_task = asyncio.get_running_loop().create_task(self._check_quietly())

    async def _check_quietly(self) -> None:
        import psycopg

        try:
            await self._pool.check()
        except psycopg.Error:  # pragma: no cover - the pool logs and replaces on its own
            return


class _IdleCheck:
    """The pool's ``check``: test a connection only when it sat idle for a while."""

    def __init__(
        self, idle_after: float, used_at: weakref.WeakKeyDictionary[AsyncConnection[Any], float]
    ) -> None:
        self.idle_after = idle_after
        self.used_at = used_at

    async def __call__(self, conn: AsyncConnection[Any]) -> None:
        from psycopg_pool import AsyncConnectionPool

        last = self.used_at.get(conn)
        if last is None or time.monotonic() - last >= self.idle_after:
            await AsyncConnectionPool.check_connection(conn)


@dataclass(frozen=True)
class PostgresBatchStats:
    """How well the inbox is batching (:attr:`PostgresInbox.stats`): claims and commits."""

    claims: BatchStats
    commits: BatchStats
    """Commits without work or with rows to insert only (commits with other work are not
    batched)."""


@dataclass(frozen=True, slots=True)
class _Commit:
    """One commit waiting for its batch: a compare-and-set and the rows to insert with it."""

    event_id: str
    token: int
    status: int
    inserts: tuple[PostgresInsert, ...]

    def params(self, now: datetime) -> dict[str, Any]:
        return {"event_id": self.event_id, "token": self.token, "status": self.status, "now": now}


def _event_id(commit: _Commit) -> str:
    return commit.event_id


def _claim(event_id: str, row: tuple[Any, ...], now: datetime) -> Claim:
    """The :class:`Claim` one row of :data:`_CLAIM_SQL` means."""
    _, last_claim, token, status, lease_expires_at, _ = row
    if last_claim == "committed":
        return Claim(ClaimOutcome.COMMITTED, event_id, status=status)
    if last_claim == "in_flight":
        return Claim(
            ClaimOutcome.IN_FLIGHT, event_id, retry_after=retry_after_seconds(lease_expires_at, now)
        )
    return Claim(ClaimOutcome.CLAIMED, event_id, token=token, taken_over=last_claim == "taken_over")


class _BatchRefused(Exception):
    """Raised when a batch's statement failed for a reason of its own, not a lost database."""


class _StaleToken(Exception):
    """Raised inside :meth:`PostgresInbox.commit` to roll back a commit whose token is stale."""


def _require_psycopg() -> None:
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(
            "the PostgreSQL inbox needs psycopg 3 and psycopg-pool: "
            "pip install 'hookproof[postgres]'"
        ) from exc


def _search_path_setter(schema: str) -> Any:
    from psycopg import sql

    path = [sql.Identifier(schema)] + ([] if schema == "public" else [sql.Identifier("public")])
    statement = sql.SQL("SET search_path TO {}").format(sql.SQL(", ").join(path))

    async def configure(conn: AsyncConnection[Any]) -> None:
        await conn.execute(statement)

    return configure


def _display(params: dict[str, Any]) -> str:
    user = params.get("user")
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = params.get("port")
    dbname = params.get("dbname")
    authority = f"{user}@" if user else ""
    authority += str(host) + (f":{port}" if port else "")
    return f"postgresql://{authority}/{dbname or ''}"


def _number(
    values: dict[str, str], key: str, default: Any, kind: type[Any], *, minimum: float
) -> Any:
    if key not in values:
        return default
    try:
        number = kind(values[key])
    except ValueError:
        number = None
    if number is None or number < minimum:
        raise ConfigurationError(f"invalid {key}={values[key]!r} in the PostgreSQL inbox location")
    return number


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0].strip()


def _reason(exc: BaseException, location: PostgresLocation) -> str:
    """The error's gist on one line, with the password (if any) scrubbed out."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if location.password:
        text = text.replace(location.password, "***")
    return text


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)
