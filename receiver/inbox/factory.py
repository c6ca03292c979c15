"""Opening an inbox from one location string: a PostgreSQL URL, ``:memory:`` or a SQLite path.

This is what the CLI and the reference app call with the user's ``--inbox`` option, so every
unusable location becomes one readable :class:`~receiver.exceptions.ConfigurationError`.
"""

from __future__ import annotations

import asyncio
import importlib
from datetime import timedelta
from typing import Any

from receiver.clock import ClockInput
from receiver.exceptions import ConfigurationError
from receiver.inbox.contract import DEFAULT_LEASE, Inbox, utc_now
from receiver.inbox.memory import MemoryInbox
from receiver.inbox.sqlite import SqliteInbox

__all__ = ["MEMORY_LOCATION", "POSTGRES_SCHEMES", "open_inbox"]

MEMORY_LOCATION = ":memory:"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


async def open_inbox(
    location: str, *, lease: timedelta = DEFAULT_LEASE, clock: ClockInput = utc_now
) -> Inbox:
    """The inbox at ``location``.

    ``postgresql://…``/``postgres://…`` → the PostgreSQL inbox (needs the ``postgres`` extra);
    ``:memory:`` → a :class:`MemoryInbox` (nothing survives the process); anything else → a
    :class:`SqliteInbox` in that file.
    """
    if not isinstance(location, str) or not location.strip():
        raise ConfigurationError("the inbox location must be a SQLite path, ':memory:' or a URL")
    if location.lower().startswith(POSTGRES_SCHEMES):
        postgres_inbox = _postgres_inbox_class()
        inbox: Inbox = await postgres_inbox.connect(location, lease=lease, clock=clock)
        return inbox
    if location == MEMORY_LOCATION:
        return MemoryInbox(lease=lease, clock=clock)
    # Opening runs migrations and may wait on another process's lock: off the event loop.
    return await asyncio.to_thread(SqliteInbox, location, lease=lease, clock=clock)


def _postgres_inbox_class() -> Any:
    try:
        module = importlib.import_module("receiver.inbox.postgres")
    except ImportError as error:
        missing = getattr(error, "name", None) or "receiver.inbox.postgres"
        raise ConfigurationError(
            f"a PostgreSQL inbox needs the 'postgres' extra (pip install 'hookproof[postgres]'); "
            f"cannot import {missing}"
        ) from None
    postgres_inbox = getattr(module, "PostgresInbox", None)
    if postgres_inbox is None:
        raise ConfigurationError("this hookproof build has no PostgreSQL inbox (PostgresInbox)")
    return postgres_inbox
