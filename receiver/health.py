"""What ``/healthz`` reports: can the inbox record an event durably right now?

:func:`inbox_problem` answers ``None`` when it can, else one sentence why not:

* no inbox is open (before the app's lifespan started, or after it ended);
* the backend reports a problem of its own (:class:`ReportsHealth`: the SQLite inbox says so
  when the file at its path is no longer the one it writes, see
  :mod:`receiver.inbox.sqlite_health`);
* a read of the inbox fails (the database went away: PostgreSQL down, the file unreadable).
"""

from __future__ import annotations

from typing import Final, Protocol, runtime_checkable

from receiver.inbox.contract import Inbox

__all__ = ["ReportsHealth", "inbox_problem"]

_PROBE_EVENT_ID: Final = "hookproof-healthz"


@runtime_checkable
class ReportsHealth(Protocol):
    """An inbox that can tell, without a round trip, that it cannot record durably."""

    def health_problem(self) -> str | None: ...


async def inbox_problem(inbox: Inbox | None) -> str | None:
    """Why ``inbox`` cannot record an event durably now, or ``None``."""
    if inbox is None:
        return "the inbox is not open"
    if isinstance(inbox, ReportsHealth):
        problem = inbox.health_problem()
        if problem is not None:
            return problem
    try:
        await inbox.lookup(_PROBE_EVENT_ID)
    except Exception as error:  # InboxUnavailable, or whatever a broken store raises
        return f"the inbox cannot be read: {type(error).__name__}: {error}".splitlines()[0]
    return None
