"""``open_inbox`` maps a location string to the right backend, or one readable error."""

from __future__ import annotations

import sys
import types
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import receiver.inbox
from receiver.exceptions import ConfigurationError
from receiver.inbox import MemoryInbox, SqliteInbox, open_inbox
from tests.receiver.inbox.backends import FakeClock

pytestmark = pytest.mark.anyio


async def test_memory_location_opens_the_memory_twin() -> None:
    clock = FakeClock()
    inbox = await open_inbox(":memory:", lease=timedelta(seconds=7), clock=clock)
    assert isinstance(inbox, MemoryInbox)
    assert inbox.lease == timedelta(seconds=7)
    assert (await inbox.claim("evt")).retry_after is None


async def test_a_path_opens_a_sqlite_inbox(tmp_path: Path) -> None:
    inbox = await open_inbox(str(tmp_path / "inbox.db"), lease=timedelta(seconds=9))
    try:
        assert isinstance(inbox, SqliteInbox)
        assert inbox.lease == timedelta(seconds=9)
    finally:
        await inbox.close()
    assert (tmp_path / "inbox.db").exists()


@pytest.mark.parametrize("location", ["", "   "])
async def test_an_empty_location_is_a_configuration_error(location: str) -> None:
    with pytest.raises(ConfigurationError, match="location"):
        await open_inbox(location)


async def test_an_unopenable_path_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot open the SQLite inbox"):
        await open_inbox(str(tmp_path / "no" / "such" / "dir.db"))


@pytest.mark.parametrize("url", ["postgresql://db/app", "postgres://db/app", "POSTGRESQL://db"])
async def test_a_postgres_url_without_the_module_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.setitem(sys.modules, "receiver.inbox.postgres", None)
    with pytest.raises(ConfigurationError, match="postgres"):
        await open_inbox(url)


async def test_a_postgres_url_delegates_to_postgres_inbox_connect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, Any] = {}
    clock = FakeClock()

    class FakePostgresInbox:
        @classmethod
        async def connect(cls, location: str, *, lease: timedelta, clock: Any) -> Any:
            seen.update(location=location, lease=lease, clock=clock)
            return MemoryInbox(lease=lease, clock=clock)

    module = types.ModuleType("receiver.inbox.postgres")
    module.PostgresInbox = FakePostgresInbox  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "receiver.inbox.postgres", module)
    inbox = await open_inbox("postgresql://db/app", lease=timedelta(seconds=3), clock=clock)
    assert isinstance(inbox, MemoryInbox)
    assert seen == {
        "location": "postgresql://db/app",
        "lease": timedelta(seconds=3),
        "clock": clock,
    }


def test_the_package_exports_the_backends_and_the_factory() -> None:
    for name in ("SqliteInbox", "MemoryInbox", "open_inbox"):
        assert name in receiver.inbox.__all__
        assert getattr(receiver.inbox, name) is not None
