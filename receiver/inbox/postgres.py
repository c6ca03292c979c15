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
import re
import time
import weakref
from collections.abc import AsyncIterator, Sequence
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
from receiver.inbox.postgres_schema import INBOX_TABLE, migrate

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.sql import Composed
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresInbox", "PostgresInsert", "PostgresLocation", "parse_location"]

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
VALUES (%(event_id)s, 'in_flight', 1, 1, 0, NULL, %(expires)s, %(now)s, NULL, 'claimed')
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
RETURNING last_claim, token, status, lease_expires_at, {{not_durable}}
"""
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
_FOLDED_LOCK_TIMEOUT = "1ms"
"""How long the one-statement commit may wait for a lock before it becomes a transaction."""
"""A commit whose works are rows to insert, as one statement: each insert selects its row from
``done`` (the compare-and-set), so a stale token inserts nothing."""
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
class PostgresInsert:
    """Transactional work that inserts one row: ``INSERT INTO table (columns) VALUES (values)``.

    As a work it is data, so :meth:`PostgresInbox.commit` folds it into its commit statement
    (one round trip instead of ``BEGIN``, the update, the insert and ``COMMIT``). Called with a
    connection it runs the insert there, like any other work. ``table`` may be qualified
    (``schema.table``); unqualified, it is found on the inbox's ``search_path``. Values are sent
    with psycopg's types (text, numbers, timestamps …), selected into the columns.
    """

    table: str
    columns: tuple[str, ...]
    values: tuple[Any, ...]

    def __post_init__(self) -> None:
        if not self.columns or len(self.columns) != len(self.values):
            raise ConfigurationError("PostgresInsert needs one value per column, at least one")

    def __call__(self, conn: AsyncConnection[Any]) -> Any:
        from psycopg import sql

        placeholders = sql.SQL(", ").join(sql.Placeholder() * len(self.values))
        statement = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            self._table(), self._columns(), placeholders
        )
        return conn.execute(statement, self.values)

    def _table(self) -> Composed:
        from psycopg import sql

        return sql.SQL(".").join(sql.Identifier(part) for part in self.table.split("."))

    def _columns(self) -> Composed:
        from psycopg import sql

        return sql.SQL(", ").join(sql.Identifier(column) for column in self.columns)

    def folded(self, name: str, params: dict[str, Any]) -> Composed:
        """This insert as the CTE ``name`` of a folded commit (its values added to ``params``
        as ``name_0``, ``name_1`` …): it writes its row only if ``done`` has one."""
        from psycopg import sql

        keys = [f"{name}_{n}" for n in range(len(self.values))]
        params.update(zip(keys, self.values, strict=True))
        values = sql.SQL(", ").join(sql.Placeholder(key) for key in keys)
        return sql.SQL(",\n{} AS (INSERT INTO {} ({}) SELECT {} FROM done)").format(
            sql.Identifier(name), self._table(), self._columns(), values
        )


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
        self._closed = False
        self._check_task: asyncio.Task[None] | None = None
        self._used_at = used_at if used_at is not None else weakref.WeakKeyDictionary()
        table = sql.SQL("{}.{}").format(
            sql.Identifier(location.schema), sql.Identifier(INBOX_TABLE)
        )
        not_durable = sql.SQL(_NOT_DURABLE)
        self._claim_sql = sql.SQL(_CLAIM_SQL).format(table=table, not_durable=not_durable)
        self._commit_sql = sql.SQL(_COMMIT_SQL).format(table=table)
        self._folded_update = sql.SQL(_COMMIT_SQL.strip()).format(table=table)
        self._release_sql = sql.SQL(_RELEASE_SQL).format(table=table, not_durable=not_durable)
        self._lookup_sql = sql.SQL(_LOOKUP_SQL).format(table=table)
        self._purge_sql = sql.SQL(_PURGE_SQL).format(table=table)

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

    async def claim(self, event_id: str) -> Claim:
        now = self._now()
        params = {"event_id": event_id, "now": now, "expires": now + self.lease}
        async with self._connection() as conn:
            row = await self._fetchone(conn, self._claim_sql, params)
        if row is None:  # pragma: no cover - INSERT … RETURNING always returns the row
            raise InboxError(f"claiming {event_id!r} returned nothing")
        last_claim, token, status, lease_expires_at, _ = row
        if last_claim == "committed":
            return Claim(ClaimOutcome.COMMITTED, event_id, status=status)
        if last_claim == "in_flight":
            return Claim(
                ClaimOutcome.IN_FLIGHT,
                event_id,
                retry_after=retry_after_seconds(lease_expires_at, now),
            )
        return Claim(
            ClaimOutcome.CLAIMED, event_id, token=token, taken_over=last_claim == "taken_over"
        )

    async def commit(
        self,
        event_id: str,
        token: int,
        status: int,
        work: Sequence[TransactionalWork] = (),
    ) -> bool:
        params = {"event_id": event_id, "token": token, "status": status, "now": self._now()}
        works = tuple(work)
        if not works:  # one statement is its own (durable) transaction: one round trip
            async with self._connection() as conn:
                return await self._fetchone(conn, self._commit_sql, params) is not None
        if all(type(item) is PostgresInsert for item in works):
            return await self._commit_folded(params, works)  # type: ignore[arg-type]
        return await self._commit_in_transaction(params, works)

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
    ) -> bool:
        """The compare-and-set and every insert in one statement: one durable round trip. An
        insert that fails fails the statement, so nothing is kept and its error is raised
        unchanged (as a work's error is).

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
                waits = True  # (an OperationalError: caught here, before _connection sees it)
            else:
                waits = False
                cursor.nextset()
                row = await cursor.fetchone()
        if waits:
            return await self._commit_in_transaction(params, inserts)
        return row is not None and row[0] == 1

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
        if self._closed:
            return
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
        """Run one of the inbox's own statements; its non-connection errors become InboxError."""
        import psycopg

        try:
            cursor = await conn.execute(query, params)
            row: tuple[Any, ...] | None = await cursor.fetchone()
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:
            raise InboxError(
                f"the PostgreSQL inbox in schema {self._location.schema!r} at "
                f"{self._location.display} failed: {_reason(exc, self._location)}"
            ) from exc
        return row

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
