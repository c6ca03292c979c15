"""PostgreSQL for the inbox tests: fresh schemas, locations into them, and the agreement hook.

Every PostgreSQL test works in a schema of its own (``hp_<purpose>_<random>``) and drops it with
``CASCADE`` afterwards, so tests of several helpers can share one server. :func:`open_postgres` is
the hook :mod:`tests.receiver.inbox.backends` calls to add PostgreSQL to the agreement machine.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql

from receiver.inbox import Clock, TransactionalWork
from receiver.inbox.postgres import DEFAULT_CHECK_IDLE_AFTER_S, PostgresInbox, PostgresInsert
from tests.receiver.inbox.backends import OpenedBackend

__all__ = [
    "drop_schema",
    "effects_inbox",
    "fresh_schema",
    "inbox_location",
    "open_postgres",
    "terminate_backends",
]


def fresh_schema(purpose: str) -> str:
    """A schema name no other test uses."""
    return f"hp_{purpose}_{uuid.uuid4().hex[:10]}"


def inbox_location(dsn: str, schema: str, **parameters: str | int) -> str:
    """``dsn`` with ``schema`` and further query parameters (``application_name``, pool sizes …)."""
    parts = urlsplit(dsn)
    query = [*((k, v) for k, v in _query(parts.query)), ("schema", schema)]
    query += [(key, str(value)) for key, value in parameters.items()]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _query(query: str) -> list[tuple[str, str]]:
    return parse_qsl(query, keep_blank_values=True)


async def drop_schema(dsn: str, schema: str) -> None:
    """Drop ``schema`` and everything in it (idempotent)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


async def terminate_backends(dsn: str, application_name: str) -> int:
    """``pg_terminate_backend`` every session of ``application_name``; how many were killed."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s AND pid <> pg_backend_pid()",
            (application_name,),
        )
        row = await cursor.fetchone()
    return int(row[0]) if row else 0


@asynccontextmanager
async def effects_inbox(
    dsn: str,
    purpose: str,
    effects_table: str,
    *,
    clock: Clock,
    lease: timedelta,
    pool_max_size: int,
    sessions_named_after_schema: bool = False,
    check_idle_after: float | None = DEFAULT_CHECK_IDLE_AFTER_S,
) -> AsyncIterator[tuple[PostgresInbox, str]]:
    """A PostgresInbox in a fresh schema with an ``effects`` table (``effects_table``: its column
    list) next to it; closed and its schema dropped afterwards."""
    schema = fresh_schema(purpose)
    named = {"application_name": schema} if sessions_named_after_schema else {}
    location = inbox_location(dsn, schema, pool_max_size=pool_max_size, **named)
    inbox = await PostgresInbox.connect(
        location, lease=lease, clock=clock, check_idle_after=check_idle_after
    )
    try:
        async with inbox.connection() as conn:
            await conn.execute(f"CREATE TABLE effects ({effects_table})")
        yield inbox, schema
    finally:
        await inbox.close()
        await drop_schema(dsn, schema)


async def open_postgres(
    dsn: str, clock: Clock, lease: timedelta, *, rows: bool = False
) -> OpenedBackend:
    """A PostgresInbox in a fresh schema, with an effects table written by transactional work:
    a coroutine function, or with ``rows`` a :class:`PostgresInsert` (folded into the commit)."""
    schema = fresh_schema("agree")
    location = inbox_location(dsn, schema, pool_max_size=6)
    inbox = await PostgresInbox.connect(location, lease=lease, clock=clock)
    reader = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    await reader.execute(
        sql.SQL("CREATE TABLE {}.agreement_effects (tag text NOT NULL)").format(
            sql.Identifier(schema)
        )
    )
    read_effects = sql.SQL("SELECT tag FROM {}.agreement_effects").format(sql.Identifier(schema))

    def effect(tag: str) -> TransactionalWork:
        if rows:
            return PostgresInsert("agreement_effects", ("tag",), (tag,))

        async def record(conn: psycopg.AsyncConnection[Any]) -> None:
            # Unqualified on purpose: the pool's search_path puts it in the inbox's schema.
            await conn.execute("INSERT INTO agreement_effects (tag) VALUES (%s)", (tag,))

        return record

    async def effects() -> list[str]:
        cursor = await reader.execute(read_effects)
        return sorted(tag for (tag,) in await cursor.fetchall())

    async def cleanup() -> None:
        try:
            await inbox.close()
            await reader.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )
        finally:
            await reader.close()

    return OpenedBackend(inbox, effect, effects, cleanup)
