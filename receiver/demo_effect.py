"""The reference app's demo effect: a renewal reminder recorded once per event, and counted.

The effect is a row in ``hookproof_renewal_reminders`` (``event_id``, ``renewal_id``,
``event_type``): deliberately WITHOUT a unique key, so applying an event twice shows up as two rows
and tests (and the probe's ``effects``) can see it. Three stores, one per inbox backend:

* :class:`MemoryReminders` — a list per event in the
  :class:`~receiver.inbox.memory.MemoryInbox` ``store``;
* :class:`SqliteReminders` — a table in the inbox's own SQLite file;
* :class:`PostgresReminders` — a table next to the PostgreSQL inbox (same schema).

The type and renewal id are stored as :func:`reminder_text` gives them: PostgreSQL's ``text``
cannot hold U+0000, which valid JSON may carry (``"\\u0000"``), and a genuine event must not be
refused on every retry for it; every store holds the same row.

``work(...)`` returns the transactional work that writes the row through the inbox's commit
transaction (exactly-once effect); ``apply_directly(...)`` writes it outside that transaction (the
non-transactional mode: at-least-once, deduplicated by the inbox). ``count(event_id)`` is what the
probe reports as ``effects``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from starlette.concurrency import run_in_threadpool

from receiver.exceptions import ConfigurationError
from receiver.inbox.contract import Inbox, TransactionalWork
from receiver.inbox.memory import MemoryInbox
from receiver.inbox.sqlite import SqliteInbox, SqliteInsert
from receiver.sqlite_db import connect

if TYPE_CHECKING:
    from receiver.inbox.postgres import PostgresInbox

__all__ = [
    "TABLE",
    "MemoryReminders",
    "PostgresReminders",
    "Reminders",
    "SqliteReminders",
    "reminder_text",
    "reminders_for",
]

TABLE = "hookproof_renewal_reminders"
_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (event_id TEXT NOT NULL, renewal_id TEXT, event_type TEXT)"
)
_INDEX = f"CREATE INDEX IF NOT EXISTS {TABLE}_event_id ON {TABLE} (event_id)"
_INSERT_SQLITE = f"INSERT INTO {TABLE} (event_id, renewal_id, event_type) VALUES (?, ?, ?)"
_COUNT_SQLITE = f"SELECT count(*) FROM {TABLE} WHERE event_id = ?"
_COLUMNS = ("event_id", "renewal_id", "event_type")
_INSERT_PG = f"INSERT INTO {TABLE} (event_id, renewal_id, event_type) VALUES (%s, %s, %s)"
_COUNT_PG = f"SELECT count(*) FROM {TABLE} WHERE event_id = %s"


def reminder_text(value: str) -> str:
    """``value`` as the demo's text columns hold it: each U+0000 as U+FFFD."""
    return value.replace("\x00", "\ufffd")


class Reminders(Protocol):
    """Where the demo effect is written and counted."""

    async def prepare(self) -> None:
        """Create the effect table if needed (called once at start-up)."""
        ...

    def work(self, event_id: str, renewal_id: str | None, event_type: str) -> TransactionalWork:
        """The transactional work that records one reminder with the inbox commit."""
        ...

    async def apply_directly(self, event_id: str, renewal_id: str | None, event_type: str) -> None:
        """Record one reminder outside the inbox transaction."""
        ...

    async def count(self, event_id: str) -> int:
        """How many reminders this event produced."""
        ...


class MemoryReminders:
    """Reminders as dicts in a MemoryInbox ``store``, one list per event under
    :meth:`key` (so that a commit touches its own event's rows, not every reminder kept)."""

    def __init__(self, inbox: MemoryInbox) -> None:
        self.inbox = inbox

    @staticmethod
    def key(event_id: str) -> str:
        """Where ``event_id``'s reminders sit in the store."""
        return f"{TABLE}/{event_id}"

    async def prepare(self) -> None:
        return None

    def work(self, event_id: str, renewal_id: str | None, event_type: str) -> TransactionalWork:
        row = {"event_id": event_id, "renewal_id": renewal_id, "event_type": event_type}
        key = self.key(event_id)

        def record(store: Any) -> None:
            store.setdefault(key, []).append(row)

        return record

    async def apply_directly(self, event_id: str, renewal_id: str | None, event_type: str) -> None:
        self.work(event_id, renewal_id, event_type)(self.inbox.store)

    async def count(self, event_id: str) -> int:
        return len(self.inbox.store.get(self.key(event_id), ()))


class SqliteReminders:
    """Reminders in a table of the SQLite inbox's own file; counted through the inbox's own read
    connections when it is given (no connection opened per probe read)."""

    def __init__(self, path: str, inbox: SqliteInbox | None = None) -> None:
        self.path = path
        self.inbox = inbox

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        conn = connect(self.path)
        try:
            row = conn.execute(sql, params).fetchone()
            return int(row[0]) if row else 0
        finally:
            conn.close()

    async def prepare(self) -> None:
        await run_in_threadpool(self._run, _CREATE)
        await run_in_threadpool(self._run, _INDEX)

    def work(self, event_id: str, renewal_id: str | None, event_type: str) -> TransactionalWork:
        """The row as data: the inbox writes it with its commit, without a savepoint."""
        return SqliteInsert(TABLE, _COLUMNS, (event_id, renewal_id, event_type))

    async def apply_directly(self, event_id: str, renewal_id: str | None, event_type: str) -> None:
        await run_in_threadpool(self._run, _INSERT_SQLITE, (event_id, renewal_id, event_type))

    async def count(self, event_id: str) -> int:
        if self.inbox is None:
            return await run_in_threadpool(self._run, _COUNT_SQLITE, (event_id,))
        row = await self.inbox.fetch_one(_COUNT_SQLITE, (event_id,))
        return int(row[0]) if row else 0


class PostgresReminders:
    """Reminders in a table next to the PostgreSQL inbox (its schema comes first on the path),
    reached through the inbox's own connection pool."""

    def __init__(self, inbox: PostgresInbox) -> None:
        self.inbox = inbox

    async def _run(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        async with self.inbox.connection() as conn:
            cursor = await conn.execute(sql, params)
            row = await cursor.fetchone() if cursor.description else None
            await conn.commit()
            return int(row[0]) if row else 0

    async def prepare(self) -> None:
        """Create the table under the schema's migration lock: replicas may start together."""
        from receiver.inbox.postgres_schema import advisory_lock_key

        async with self.inbox.connection() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(%s)", (advisory_lock_key(self.inbox.schema),)
            )
            await conn.execute(_CREATE)
            await conn.execute(_INDEX)

    def work(self, event_id: str, renewal_id: str | None, event_type: str) -> TransactionalWork:
        """The row as data: the inbox folds it into its one commit statement (one round trip)."""
        from receiver.inbox.postgres import PostgresInsert

        return PostgresInsert(TABLE, _COLUMNS, (event_id, renewal_id, event_type))

    async def apply_directly(self, event_id: str, renewal_id: str | None, event_type: str) -> None:
        await self._run(_INSERT_PG, (event_id, renewal_id, event_type))

    async def count(self, event_id: str) -> int:
        return await self._run(_COUNT_PG, (event_id,))


def reminders_for(inbox: Inbox, location: str) -> Reminders:
    """The reminder store that lives next to ``inbox`` (opened from ``location``)."""
    if isinstance(inbox, MemoryInbox):
        return MemoryReminders(inbox)
    if location.lower().startswith(("postgresql://", "postgres://")):
        from receiver.inbox.postgres import PostgresInbox

        if not isinstance(inbox, PostgresInbox):
            raise ConfigurationError(f"{location!r} names PostgreSQL but the inbox is not on it")
        return PostgresReminders(inbox)
    if isinstance(inbox, SqliteInbox):
        return SqliteReminders(inbox.path, inbox)
    return SqliteReminders(location)  # another inbox kind, given by the caller: the file itself
