"""The SQLite inbox's schema, as an ordered list of migrations (data, applied once each).

The steps are plain SQL, applied by :func:`receiver.sqlite_db.apply_migrations` (sqlite-utils'
``Migrations`` when installed, else a ``PRAGMA user_version`` counter), the whole upgrade in one
``BEGIN IMMEDIATE`` transaction, so two processes opening one new file cannot both apply it.

Times are stored as integer microseconds since the Unix epoch (UTC): exact, comparable, and
free of the float rounding that a ``REAL`` column would bring.
"""

from __future__ import annotations

import sqlite3

from receiver.sqlite_db import apply_migrations as _apply_migrations

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


def apply_migrations(conn: sqlite3.Connection) -> None:
    """Bring the inbox schema on ``conn`` (autocommit mode) up to date, atomically."""
    _apply_migrations(conn, MIGRATION_SET, MIGRATIONS)
