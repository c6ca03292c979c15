"""The inbox backends the agreement machine drives, as data: add one factory to add a backend.

:func:`backend_factories` lists every backend available here: always the in-memory twin and
SQLite; PostgreSQL too when ``HOOKPROOF_TEST_POSTGRES_DSN`` is set and ``receiver.inbox.postgres``
imports. Each :class:`Backend` opens a FRESH, empty inbox (its own file, its own schema) together
with the two things the machine needs for transactional mode: a ``work`` that records one effect
in the backend's own transaction, and a way to read the committed effects back.
"""

from __future__ import annotations

import importlib
import inspect
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from receiver.inbox import Clock, Inbox, MemoryInbox, SqliteInbox, TransactionalWork
from receiver.inbox.sqlite import SqliteInsert

__all__ = [
    "POSTGRES_DSN_VARIABLE",
    "Backend",
    "FakeClock",
    "OpenedBackend",
    "WorkFailure",
    "backend_factories",
    "failing",
    "memory_backend",
    "postgres_backend",
    "sqlite_backend",
    "sqlite_rows_backend",
]

POSTGRES_DSN_VARIABLE = "HOOKPROOF_TEST_POSTGRES_DSN"


class FakeClock:
    """A controllable clock: aware UTC, microsecond precision; time moves only on demand."""

    def __init__(
        self, start: datetime = datetime(2026, 1, 1, 9, 57, 50, 123456, tzinfo=UTC)
    ) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


class WorkFailure(Exception):
    """What a deliberately failing transactional work raises."""


@dataclass
class OpenedBackend:
    """One fresh inbox plus what the agreement machine needs to observe its effects."""

    inbox: Inbox
    effect: Callable[[str], TransactionalWork]
    """A work that records ``tag`` through the transaction handle it is given."""
    effects: Callable[[], Awaitable[list[str]]]
    """The tags committed so far, sorted."""
    cleanup: Callable[[], Awaitable[None]]
    """Close the inbox and remove what was created for it (file, schema)."""


@dataclass(frozen=True)
class Backend:
    name: str
    open: Callable[[Clock, timedelta], Awaitable[OpenedBackend]]


def failing(work: TransactionalWork) -> TransactionalWork:
    """``work``, then a :class:`WorkFailure`: its write must vanish with the failure."""

    def run(handle: Any) -> Any:
        result = work(handle)
        if inspect.isawaitable(result):

            async def then() -> None:
                await result
                raise WorkFailure("the handler failed after writing")

            return then()
        raise WorkFailure("the handler failed after writing")

    return run


async def _open_memory(clock: Clock, lease: timedelta) -> OpenedBackend:
    inbox = MemoryInbox(lease=lease, clock=clock)

    def effect(tag: str) -> TransactionalWork:
        def record(store: dict[str, Any]) -> None:
            store.setdefault("effects", []).append(tag)

        return record

    async def effects() -> list[str]:
        return sorted(inbox.store.get("effects", []))

    return OpenedBackend(inbox, effect, effects, inbox.close)


async def _open_sqlite(clock: Clock, lease: timedelta, *, rows: bool = False) -> OpenedBackend:
    directory = tempfile.mkdtemp(prefix="hookproof-inbox-")
    path = os.path.join(directory, "inbox.db")
    with sqlite3.connect(path) as setup:
        setup.execute("CREATE TABLE agreement_effects (tag TEXT NOT NULL)")
    setup.close()
    inbox = SqliteInbox(path, lease=lease, clock=clock)

    def effect(tag: str) -> TransactionalWork:
        if rows:  # a row as data: committed without a savepoint when it is the only work
            return SqliteInsert("agreement_effects", ("tag",), (tag,))

        def record(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO agreement_effects (tag) VALUES (?)", (tag,))

        return record

    async def effects() -> list[str]:
        reader = sqlite3.connect(path)
        try:
            rows = reader.execute("SELECT tag FROM agreement_effects ORDER BY tag").fetchall()
        finally:
            reader.close()
        return [tag for (tag,) in rows]

    async def cleanup() -> None:
        await inbox.close()
        shutil.rmtree(directory, ignore_errors=True)

    return OpenedBackend(inbox, effect, effects, cleanup)


memory_backend = Backend("memory", _open_memory)
sqlite_backend = Backend("sqlite", _open_sqlite)


async def _open_sqlite_rows(clock: Clock, lease: timedelta) -> OpenedBackend:
    return await _open_sqlite(clock, lease, rows=True)


sqlite_rows_backend = Backend("sqlite-rows", _open_sqlite_rows)


def postgres_backend(*, rows: bool = False) -> Backend | None:
    """The PostgreSQL backend, or ``None`` where no server is configured or the module is absent.

    HOOK for the PostgreSQL inbox: ``tests/receiver/inbox/postgres_backend.py`` (its owner writes
    it) defines ``async def open_postgres(dsn: str, clock: Clock, lease: timedelta) ->
    OpenedBackend`` that opens a PostgresInbox in a FRESH schema and whose ``cleanup`` drops it.
    """
    dsn = os.environ.get(POSTGRES_DSN_VARIABLE)
    if not dsn:
        return None
    try:
        importlib.import_module("receiver.inbox.postgres")
        module = importlib.import_module("tests.receiver.inbox.postgres_backend")
    except ImportError:
        return None
    open_postgres = module.open_postgres

    async def open_backend(clock: Clock, lease: timedelta) -> OpenedBackend:
        opened: OpenedBackend = await open_postgres(dsn, clock, lease, rows=rows)
        return opened

    # ``rows``: the effect is a PostgresInsert, folded into the one commit statement.
    return Backend("postgres-rows" if rows else "postgres", open_backend)


def backend_factories() -> list[Backend]:
    """Every backend available in this environment; the first is the reference (memory)."""
    backends = [memory_backend, sqlite_backend, sqlite_rows_backend]
    for rows in (False, True):
        postgres = postgres_backend(rows=rows)
        if postgres is not None:
            backends.append(postgres)
    return backends
