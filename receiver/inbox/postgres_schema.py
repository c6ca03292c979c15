"""The PostgreSQL inbox's schema: a versioned migration list kept as data, and its applier.

Migrations are applied by the backend itself when it connects. Several replicas may start at once,
so the whole run happens in one transaction that first takes a transaction-scoped advisory lock
derived from the schema name: the first replica creates the schema and applies what is missing,
the others wait on the lock, then find every version recorded and apply nothing. Because the lock
is transaction-scoped it can never be left behind by a replica that dies half-way (its transaction
rolls back and the lock goes with it).

Each migration's SQL names the schema as ``{schema}``; it is filled in with a quoted identifier,
never by string formatting of user input. Applied versions are recorded in
``{schema}.hookproof_inbox_migrations``. A database whose recorded version is newer than this code
knows is refused (an older replica must not write to a newer layout).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from receiver.exceptions import ConfigurationError

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = [
    "INBOX_TABLE",
    "MIGRATIONS",
    "MIGRATIONS_TABLE",
    "Migration",
    "advisory_lock_key",
    "latest_version",
    "migrate",
]

INBOX_TABLE = "hookproof_inbox"
MIGRATIONS_TABLE = "hookproof_inbox_migrations"


@dataclass(frozen=True)
class Migration:
    """One step of the schema: applied once, in ``version`` order, recorded when done."""

    version: int
    name: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "create the inbox table",
        (
            """
            CREATE TABLE {schema}.hookproof_inbox (
                event_id text PRIMARY KEY,
                state text NOT NULL
                    CHECK (state IN ('in_flight', 'released', 'committed')),
                token bigint NOT NULL CHECK (token > 0),
                deliveries bigint NOT NULL CHECK (deliveries > 0),
                effects bigint NOT NULL CHECK (effects >= 0),
                status integer,
                lease_expires_at timestamptz,
                created_at timestamptz NOT NULL,
                committed_at timestamptz,
                last_claim text NOT NULL
                    CHECK (last_claim IN ('claimed', 'taken_over', 'in_flight', 'committed'))
            )
            """,
        ),
    ),
    Migration(
        2,
        "index commit times for retention",
        (
            """
            CREATE INDEX hookproof_inbox_committed_at
                ON {schema}.hookproof_inbox (committed_at)
                WHERE committed_at IS NOT NULL
            """,
        ),
    ),
)


def latest_version() -> int:
    """The newest schema version this code knows."""
    return max(migration.version for migration in MIGRATIONS)


def advisory_lock_key(schema: str) -> int:
    """A stable signed 64-bit advisory-lock key for migrating ``schema`` (same in every replica)."""
    return zlib.crc32(f"hookproof-inbox-migrations:{schema}".encode()) - 2**31


async def migrate(conn: AsyncConnection[object], schema: str) -> int:
    """Create ``schema`` and bring it to :func:`latest_version`; return the version found before.

    Runs in one transaction under a transaction-scoped advisory lock, so concurrent callers
    serialise and exactly one of them applies each migration.
    """
    from psycopg import sql

    ident = sql.Identifier(schema)
    table = sql.SQL("{schema}.{table}").format(schema=ident, table=sql.Identifier(MIGRATIONS_TABLE))
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_lock_key(schema),))
        cursor = await conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
        if await cursor.fetchone() is None:  # CREATE SCHEMA needs CREATE on the database, even
            await conn.execute(sql.SQL("CREATE SCHEMA {}").format(ident))  # with IF NOT EXISTS
        await conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {table} ("
                " version integer PRIMARY KEY,"
                " name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(table=table)
        )
        cursor = await conn.execute(
            sql.SQL("SELECT coalesce(max(version), 0) FROM {}").format(table)
        )
        row = await cursor.fetchone()
        found = int(row[0]) if row is not None else 0  # type: ignore[index]
        if found > latest_version():
            raise ConfigurationError(
                f"the inbox schema {schema!r} is at version {found}, newer than this hookproof "
                f"knows ({latest_version()}); upgrade hookproof on every replica"
            )
        for migration in MIGRATIONS:
            if migration.version <= found:
                continue
            for statement in migration.statements:
                await conn.execute(sql.SQL(statement).format(schema=ident))
            await conn.execute(
                sql.SQL("INSERT INTO {} (version, name) VALUES (%s, %s)").format(table),
                (migration.version, migration.name),
            )
    return found
