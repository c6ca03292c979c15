"""The inbox contract: one durable record per ``event_id`` and what every backend must do with it.

A record lives through these states::

    (absent) --claim--> in_flight --commit(status)--> committed
                        in_flight --release-------> released   (claimable again at once)
                        in_flight --lease expires--> (claimable: the claiming process died)

Required operations of every backend (:class:`Inbox`):

``claim(event_id)``
    Count one delivery of the event, then: absent or released or in flight with an expired lease
    → :attr:`ClaimOutcome.CLAIMED` with a new, strictly larger fencing ``token`` and a lease that
    expires ``lease`` from now; in flight with a live lease → :attr:`ClaimOutcome.IN_FLIGHT` with
    ``retry_after`` (whole seconds, at least 1); committed → :attr:`ClaimOutcome.COMMITTED` with the
    stored ``status``. Claims of one event are serialised: of two concurrent claims one wins.
    A claim made for a caller cancelled meanwhile (an ASGI server that cancels the app when the
    client hangs up) is released at once, not left to its lease (:mod:`receiver.inbox.orphans`).
``commit(event_id, token, status, work=())``
    Compare-and-set on the token: only the current holder of a live or expired-but-not-taken-over
    claim commits. In the same transaction run every ``work`` callable with the backend's
    transaction handle (transactional mode), store ``status``, count one effect. Return ``False``
    (and change nothing, run no work) when the token is stale. Durable before it returns: a caller
    may answer 2xx as soon as it does. If a ``work`` raises, ``commit`` re-raises that exception
    unchanged and keeps nothing of the commit (no work writes, no status, no effect): the record
    stays in flight under the same token, so the caller may ``release`` it.
``release(event_id, token)``
    Compare-and-set on the token; the record becomes claimable again at once (the handler failed
    transiently). Returns whether it released.
``lookup(event_id)``
    The :class:`InboxRecord` or ``None``.
``purge(committed_before)``
    Retention: delete committed records committed before the cutoff; return how many.
``close()``
    Release connections and threads; idempotent.

All operations are coroutines and never block the event loop. Time comes from the backend's
injected ``clock`` (a :class:`receiver.clock.Clock`, or a callable returning timezone-aware UTC
datetimes), never from a default argument. A store that
cannot be reached raises :class:`~receiver.exceptions.InboxUnavailable`.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from receiver.exceptions import ConfigurationError

__all__ = [
    "DEFAULT_LEASE",
    "Claim",
    "ClaimOutcome",
    "Clock",
    "Inbox",
    "InboxRecord",
    "RecordState",
    "RowInsert",
    "TransactionalWork",
    "utc_now",
]

Clock = Callable[[], datetime]
"""The callable form of a clock: returns :meth:`receiver.clock.Clock.now`. Every backend also
accepts a :class:`receiver.clock.Clock` object (``receiver.clock.ClockInput``)."""

TransactionalWork = Callable[[Any], Any]
"""Work run inside the inbox transaction; it receives the backend's transaction handle
(a ``sqlite3.Connection`` for SQLite, a psycopg ``AsyncConnection`` for PostgreSQL — there it may
be a coroutine function). If it raises, the commit fails and nothing of it is kept."""

DEFAULT_LEASE = timedelta(seconds=30)


@dataclass(frozen=True)
class RowInsert:
    """Transactional work as data: one row to insert, ``INSERT INTO table (columns) VALUES
    (values)``. Each backend has its own kind (``SqliteInsert``, ``PostgresInsert``) that it can
    write with its commit, without running the work as a callable."""

    table: str
    columns: tuple[str, ...]
    values: tuple[Any, ...]

    def __post_init__(self) -> None:
        if not self.columns or len(self.columns) != len(self.values):
            raise ConfigurationError(
                f"{type(self).__name__} needs one value per column, at least one"
            )


def utc_now() -> datetime:
    """The real clock: now, as a timezone-aware UTC datetime."""
    return datetime.now(UTC)


class ClaimOutcome(enum.Enum):
    CLAIMED = "claimed"
    IN_FLIGHT = "in_flight"
    COMMITTED = "committed"


class RecordState(enum.Enum):
    IN_FLIGHT = "in_flight"
    RELEASED = "released"
    COMMITTED = "committed"


@dataclass(frozen=True)
class Claim:
    """The answer to :meth:`Inbox.claim`."""

    outcome: ClaimOutcome
    event_id: str
    token: int = 0
    """The fencing token to commit or release with (only for ``CLAIMED``)."""
    status: int | None = None
    """The stored response status (only for ``COMMITTED``)."""
    retry_after: int | None = None
    """Whole seconds until the live lease expires, at least 1 (only for ``IN_FLIGHT``)."""
    taken_over: bool = False
    """``CLAIMED`` by taking over an expired lease of another claim."""


@dataclass(frozen=True)
class InboxRecord:
    """One event's durable record, as :meth:`Inbox.lookup` returns it."""

    event_id: str
    state: RecordState
    token: int
    deliveries: int
    effects: int
    status: int | None
    lease_expires_at: datetime | None
    created_at: datetime
    committed_at: datetime | None


class Inbox(abc.ABC):
    """The durable ``event_id`` inbox; see the module docstring for the full contract."""

    lease: timedelta

    @abc.abstractmethod
    async def claim(self, event_id: str) -> Claim: ...

    @abc.abstractmethod
    async def commit(
        self,
        event_id: str,
        token: int,
        status: int,
        work: Sequence[TransactionalWork] = (),
    ) -> bool: ...

    @abc.abstractmethod
    async def release(self, event_id: str, token: int) -> bool: ...

    @abc.abstractmethod
    async def lookup(self, event_id: str) -> InboxRecord | None: ...

    @abc.abstractmethod
    async def purge(self, committed_before: datetime) -> int: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> Inbox:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def retry_after_seconds(lease_expires_at: datetime, now: datetime) -> int:
    """Whole seconds until a lease expires, rounded up, at least 1."""
    remaining = (lease_expires_at - now).total_seconds()
    return max(1, int(-(-remaining // 1)))
