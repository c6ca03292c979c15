"""The SQLite inbox's schema, as an ordered list of migrations (data, applied once each).

The steps are plain SQL. They are applied with sqlite-utils' ``Migrations`` when the installed
sqlite-utils has it (4.x records them in ``_sqlite_migrations``); with an older sqlite-utils a
``PRAGMA user_version`` counter records how many steps ran. Either way the whole upgrade runs in
one ``BEGIN IMMEDIATE`` transaction, so two processes opening one new file cannot both apply it.

Times are stored as integer microseconds since the Unix epoch (UTC): exact, comparable, and
free of the float rounding that a ``REAL`` column would bring.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import sqlite_utils

__all__ = ["MIGRATIONS", "MIGRATION_SET", "apply_migrations"]

MIGRATION_SET = "hookproof_inbox"

MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "0001_inbox",
        """
        CREATE TABLE IF NOT EXISTS hookproof_inbox (
            event_id TEXT PRIMARY KEY NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('in_flight', 'released', 'committed')),
            token INTEGER NOT NULL CHECK (token > 0),
            deliveries INTEGER NOT NULL CHECK (deliveries > 0),
            effects INTEGER NOT NULL DEFAULT 0,
            status INTEGER,
            lease_expires_us INTEGER,
            created_us INTEGER NOT NULL,
            committed_us INTEGER
        ) WITHOUT ROWID
        """,
    ),
    (
        "0002_inbox_committed_index",
        """
        CREATE INDEX IF NOT EXISTS hookproof_inbox_committed
        ON hookproof_inbox (committed_us) WHERE committed_us IS NOT NULL
        """,
    ),
)
"""``(name, sql)`` in order; append new steps, never edit shipped ones."""


def _migrations_class() -> Any:
    """sqlite-utils' ``Migrations`` when this version has it, else ``None``."""
    return getattr(sqlite_utils, "Migrations", None)


def apply_migrations(conn: sqlite3.Connection) -> None:
    """Bring the schema on ``conn`` (autocommit mode) up to date, atomically."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        migrations_class = _migrations_class()
        if migrations_class is not None:
            _apply_with_sqlite_utils(conn, migrations_class)
        else:
            _apply_with_user_version(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _apply_with_sqlite_utils(conn: sqlite3.Connection, migrations_class: Any) -> None:
    migrations = migrations_class(MIGRATION_SET)
    for name, sql in MIGRATIONS:
        migrations(name=name)(_step(sql))
    # Inside our open transaction, sqlite-utils nests each step in a savepoint.
    migrations.apply(sqlite_utils.Database(conn, execute_plugins=False, recursive_triggers=False))


def _step(sql: str) -> Any:
    def step(db: sqlite_utils.Database) -> None:
        db.execute(sql)

    return step


def _apply_with_user_version(conn: sqlite3.Connection) -> None:
    (done,) = conn.execute("PRAGMA user_version").fetchone()
    for _name, sql in MIGRATIONS[done:]:
        conn.execute(sql)
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
