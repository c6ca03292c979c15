"""The SQLite store: migrations (applied once, a newer schema refused), production pragmas,
publish_many atomicity, and guarded changes."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from sender_sim import (
    ConflictError,
    Publication,
    Simulator,
    SQLiteStore,
    State,
    StoreError,
    VirtualClock,
)
from sender_sim.store import MIGRATION_SET
from tests.sender_sim.conftest import SECRET, T0, URL


def _sim(store: SQLiteStore) -> Simulator:
    sim = Simulator(store, clock=VirtualClock(T0))
    sim.add_endpoint("partner", URL, [SECRET])
    return sim


def test_a_file_store_uses_wal_and_full_sync_and_migrates_once(tmp_path: Path) -> None:
    path = tmp_path / "sender.db"
    store = SQLiteStore(path)
    assert store._read("PRAGMA journal_mode")[0][0] == "wal"
    assert store._read("PRAGMA synchronous")[0][0] == 2  # FULL
    did = _sim(store).publish(endpoint_id="partner", deadline_at=T0 + timedelta(hours=1))
    store.close()
    again = SQLiteStore(path)  # reopening applies nothing twice and keeps the data
    assert again.delivery(did).state is State.SCHEDULED
    applied = again._read(
        "SELECT name FROM _sqlite_migrations WHERE migration_set = ?", (MIGRATION_SET,)
    )
    assert applied == [("0001_sender",), ("0002_platform",)]
    again.close()


def test_each_memory_store_is_a_fresh_migrated_database_of_its_own() -> None:
    first, second = SQLiteStore(":memory:"), SQLiteStore(":memory:", synchronous="OFF")
    did = _sim(first).publish(endpoint_id="partner", deadline_at=T0 + timedelta(hours=1))
    assert first.delivery(did).state is State.SCHEDULED
    assert second._read("SELECT count(*) FROM deliveries") == [(0,)]
    for store, synchronous in ((first, 2), (second, 0)):  # FULL, OFF: as each asked
        assert store._read("PRAGMA synchronous")[0][0] == synchronous
        applied = store._read(
            "SELECT name FROM _sqlite_migrations WHERE migration_set = ?", (MIGRATION_SET,)
        )
        assert applied == [("0001_sender",), ("0002_platform",)]
        store.close()


def test_a_store_from_the_future_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sender.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES (?, ?, ?)",
            (MIGRATION_SET, "9999_future", "2030-01-01"),
        )
    with pytest.raises(StoreError, match="9999_future"):
        SQLiteStore(path)


def test_an_unopenable_path_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open"):
        SQLiteStore(tmp_path / "missing-dir" / "sender.db")
    with pytest.raises(StoreError):
        SQLiteStore(":memory:", synchronous="SOMETIMES")


def test_publish_many_is_all_or_nothing() -> None:
    sim = _sim(SQLiteStore(":memory:"))
    deadline = T0 + timedelta(hours=1)
    sim.publish(endpoint_id="partner", deadline_at=deadline, delivery_id="taken")
    batch = [
        Publication(endpoint_id="partner", deadline_at=deadline, delivery_id="fresh"),
        Publication(endpoint_id="partner", deadline_at=deadline, delivery_id="taken"),
    ]
    with pytest.raises(ConflictError, match="taken"):
        sim.publish_many(batch)
    assert [d.delivery_id for d in sim.deliveries()] == ["taken"]
    ids = sim.publish_many(
        [Publication(endpoint_id="partner", deadline_at=deadline) for _ in range(3)]
    )
    assert ids == sorted(ids)  # time-ordered ids
    assert len(set(ids)) == 3


def test_state_checks_hold_in_the_schema() -> None:
    store = SQLiteStore(":memory:")
    did = _sim(store).publish(endpoint_id="partner", deadline_at=T0 + timedelta(hours=1))
    with pytest.raises(sqlite3.IntegrityError):  # a dead letter without a reason cannot exist
        store._conn.execute(
            "UPDATE deliveries SET state = 'dead_letter', next_attempt_us = NULL"
            " WHERE delivery_id = ?",
            (did,),
        )
