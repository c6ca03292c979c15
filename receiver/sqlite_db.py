"""SQLite plumbing written once: opening a connection, the WAL switch, atomic migrations.

Used by the receiver's inbox (``receiver/inbox/sqlite.py``) and the sender's store
(``sender_sim/store.py``) alike, so both get the same behaviour when several processes open one
new file at the same moment:

* :func:`connect` opens an autocommit connection (``isolation_level=None``, usable from any
  thread) with a busy timeout and the given pragmas (``synchronous`` first);
* :func:`enable_wal` switches the file to WAL journaling, retrying while another connection holds
  the lock the switch needs: SQLite answers ``SQLITE_BUSY`` there at once, without consulting the
  busy timeout;
* :func:`apply_migrations` brings a named set of ``(name, sql)`` steps up to date in ONE
  ``BEGIN IMMEDIATE`` transaction, so two processes opening one new file cannot both apply them.
  Steps are applied with sqlite-utils' ``Migrations`` when the installed sqlite-utils has it
  (4.x; recorded in ``_sqlite_migrations``); with an older sqlite-utils a ``PRAGMA user_version``
  counter records how many steps ran (one migration set per file then). A database that records
  steps this version does not know raises :class:`~receiver.exceptions.UnknownMigrations`.

sqlite-utils is imported only when migrations run, so importing this module is cheap.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Sequence
from typing import Any, Final

from receiver.exceptions import ConfigurationError, UnknownMigrations

__all__ = [
    "BUSY_TIMEOUT_S",
    "Migration",
    "apply_migrations",
    "connect",
    "enable_wal",
]

BUSY_TIMEOUT_S: Final = 5.0
"""How long a connection waits for a lock (and :func:`enable_wal` retries) by default."""

_SYNCHRONOUS_MODES: Final = frozenset({"OFF", "NORMAL", "FULL", "EXTRA"})

Migration = tuple[str, str]
"""One migration step: ``(name, sql)``; the SQL may hold several ``;``-separated statements."""


def connect(
    path: str,
    *,
    synchronous: str = "FULL",
    busy_timeout_s: float = BUSY_TIMEOUT_S,
    pragmas: Iterable[str] = (),
) -> sqlite3.Connection:
    """An autocommit connection to ``path`` with ``synchronous`` and then each of ``pragmas``
    (``"name=value"`` strings) set. ``synchronous`` must be OFF, NORMAL, FULL or EXTRA."""
    mode = synchronous.upper()
    if mode not in _SYNCHRONOUS_MODES:
        raise ConfigurationError(f"unknown synchronous mode {synchronous!r}")
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_s
    )
    try:
        conn.execute(f"PRAGMA synchronous = {mode}")
        for pragma in pragmas:
            conn.execute(f"PRAGMA {pragma}")
    except BaseException:
        conn.close()
        raise
    return conn


def enable_wal(conn: sqlite3.Connection, *, timeout_s: float = BUSY_TIMEOUT_S) -> str:
    """Switch ``conn``'s file to WAL journaling; the journal mode it then has.

    Connections opening one new file at the same moment (replicas, or several sender processes,
    starting together) can get ``SQLITE_BUSY`` here at once, without SQLite consulting the busy
    timeout: the switch needs an exclusive lock. So the switch is retried, with a growing pause,
    for as long as ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    pause = 0.002
    while True:
        try:
            (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            return str(mode)
        except sqlite3.OperationalError as error:
            busy = getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_BUSY
            if not busy or time.monotonic() > deadline:
                raise
        time.sleep(pause)  # real-time: another connection holds the lock the switch needs
        pause = min(pause * 2, 0.05)


def _migrations_class() -> Any:
    """sqlite-utils' ``Migrations`` when this version has it, else ``None``."""
    import sqlite_utils

    return getattr(sqlite_utils, "Migrations", None)


def apply_migrations(
    conn: sqlite3.Connection, migration_set: str, steps: Sequence[Migration]
) -> None:
    """Bring ``migration_set`` on ``conn`` (autocommit mode) up to ``steps``, atomically.

    Raises :class:`~receiver.exceptions.UnknownMigrations` (and changes nothing) when the
    database records steps of this set that ``steps`` does not hold (a newer version wrote it).
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        migrations_class = _migrations_class()
        if migrations_class is not None:
            _apply_with_sqlite_utils(conn, migrations_class, migration_set, steps)
        else:
            _apply_with_user_version(conn, migration_set, steps)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _statements(sql: str) -> list[str]:
    return [statement for statement in sql.split(";") if statement.strip()]


def _apply_with_sqlite_utils(
    conn: sqlite3.Connection, migrations_class: Any, migration_set: str, steps: Sequence[Migration]
) -> None:
    import sqlite_utils

    migrations = migrations_class(migration_set)
    for name, sql in steps:
        migrations(name=name)(_step(name, sql))
    db = sqlite_utils.Database(conn, execute_plugins=False, recursive_triggers=False)
    known = {name for name, _ in steps}
    unknown = [m.name for m in migrations.applied(db) if m.name not in known]
    if unknown:
        raise UnknownMigrations(migration_set, sorted(unknown))
    # Inside our open transaction, sqlite-utils nests each step in a savepoint.
    migrations.apply(db)


def _step(name: str, sql: str) -> Any:
    def step(db: Any) -> None:
        for statement in _statements(sql):
            db.execute(statement)

    step.__name__ = name
    return step


def _apply_with_user_version(
    conn: sqlite3.Connection, migration_set: str, steps: Sequence[Migration]
) -> None:
    (done,) = conn.execute("PRAGMA user_version").fetchone()
    if done > len(steps):
        raise UnknownMigrations(migration_set, [f"step {n + 1}" for n in range(len(steps), done)])
    for _name, sql in steps[done:]:
        for statement in _statements(sql):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {len(steps)}")
