"""Several sender processes opening one NEW store file at the same moment all succeed.

The WAL switch answers ``SQLITE_BUSY`` at once (without the busy timeout) while another
connection holds its lock, and two processes must not both apply the migrations; the store shares
the receiver inbox's plumbing (``receiver.sqlite_db``) for both. Many rounds, because the race is
won most times.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from sender_sim import SQLiteStore, StoreError
from sender_sim.store import MIGRATION_SET

PROCESSES = 4
ROUNDS = 25

_barrier: Any = None


def _init(barrier: Any) -> None:
    global _barrier
    _barrier = barrier


def _open_store(path: str) -> str:
    """Open (and close) the store at ``path`` once every process is ready: its journal mode,
    or the error it got."""
    _barrier.wait(timeout=60)
    try:
        store = SQLiteStore(path)
    except StoreError as error:
        return f"error: {error}"
    try:
        return str(store._read("PRAGMA journal_mode")[0][0])
    finally:
        store.close()


def test_processes_opening_a_new_store_file_at_once_all_succeed(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES)
    outcomes: list[str] = []
    with ProcessPoolExecutor(
        PROCESSES, mp_context=context, initializer=_init, initargs=(barrier,)
    ) as pool:
        for round_number in range(ROUNDS):
            path = tmp_path / f"new-{round_number}.db"
            opened = list(pool.map(_open_store, [str(path)] * PROCESSES))
            outcomes += opened
            conn = sqlite3.connect(path)
            try:
                applied = conn.execute(
                    "SELECT name FROM _sqlite_migrations WHERE migration_set = ?",
                    (MIGRATION_SET,),
                ).fetchall()
            finally:
                conn.close()
            assert applied == [("0001_sender",), ("0002_platform",)]
    failures = [outcome for outcome in outcomes if outcome != "wal"]
    assert len(outcomes) == PROCESSES * ROUNDS
    assert failures == []
