"""The in-memory inbox: the contract's reference twin, with no durability at all.

It is what the agreement state machine compares every durable backend against, and a quick inbox
for tests (``hookproof receiver --db :memory:``). Its transaction handle (what transactional work
receives) is a :class:`StoreTransaction`: a mutable mapping over the inbox's ``store`` (a plain
``dict``) that copies a top-level value the first time the work touches it and writes its changes
into the store only when the commit succeeds. A failing work leaves nothing behind, readers never
see a commit half-done, and a commit costs what its work touches, not the size of the store (a
copy of the whole store per commit made a long-running ``:memory:`` receiver slower with every
event it kept).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator, MutableMapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from receiver.clock import ClockInput, datetime_source
from receiver.inbox.contract import (
    DEFAULT_LEASE,
    Claim,
    ClaimOutcome,
    Inbox,
    InboxRecord,
    RecordState,
    TransactionalWork,
    retry_after_seconds,
    utc_now,
)

__all__ = ["MemoryInbox", "StoreTransaction"]

_DELETED: Any = object()


class StoreTransaction(MutableMapping[str, Any]):
    """The store as one commit's work sees it: ``store`` with this commit's changes on top.

    A top-level value is deep-copied into the transaction the first time it is read or written
    (the work may then change it in place), a deletion is remembered, and :meth:`apply` writes
    all of it into ``store`` at once. Until then ``store`` is untouched.
    """

    def __init__(self, store: dict[str, Any]) -> None:
        self._store = store
        self._changed: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        if key in self._changed:
            value = self._changed[key]
            if value is _DELETED:
                raise KeyError(key)
            return value
        value = copy.deepcopy(self._store[key])  # KeyError when the store has no such key
        self._changed[key] = value
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        self._changed[key] = value

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self._changed[key] = _DELETED

    def __contains__(self, key: object) -> bool:
        if key in self._changed:
            return self._changed[key] is not _DELETED
        return key in self._store

    def __iter__(self) -> Iterator[str]:
        for key in self._store:
            if self._changed.get(key) is not _DELETED:
                yield key
        for key, value in self._changed.items():
            if key not in self._store and value is not _DELETED:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def apply(self) -> None:
        """Write this transaction's changes into the store."""
        for key, value in self._changed.items():
            if value is _DELETED:
                self._store.pop(key, None)
            else:
                self._store[key] = value


class MemoryInbox(Inbox):
    """Keeps records in a dict; every operation is atomic under one lock."""

    def __init__(self, *, lease: timedelta = DEFAULT_LEASE, clock: ClockInput = utc_now) -> None:
        self.lease = lease
        self._clock = datetime_source(clock)
        self._records: dict[str, InboxRecord] = {}
        self._lock = asyncio.Lock()
        self.store: dict[str, Any] = {}
        """What transactional work writes to (through a :class:`StoreTransaction`); changed only
        when the commit succeeds."""

    async def claim(self, event_id: str) -> Claim:
        async with self._lock:
            now = self._clock()
            record = self._records.get(event_id)
            if record is None:
                record = InboxRecord(
                    event_id=event_id,
                    state=RecordState.IN_FLIGHT,
                    token=1,
                    deliveries=1,
                    effects=0,
                    status=None,
                    lease_expires_at=now + self.lease,
                    created_at=now,
                    committed_at=None,
                )
                self._records[event_id] = record
                return Claim(ClaimOutcome.CLAIMED, event_id, token=1)
            record = replace(record, deliveries=record.deliveries + 1)
            self._records[event_id] = record
            if record.state is RecordState.COMMITTED:
                return Claim(ClaimOutcome.COMMITTED, event_id, status=record.status)
            assert record.lease_expires_at is not None
            if record.state is RecordState.IN_FLIGHT and record.lease_expires_at > now:
                return Claim(
                    ClaimOutcome.IN_FLIGHT,
                    event_id,
                    retry_after=retry_after_seconds(record.lease_expires_at, now),
                )
            taken_over = record.state is RecordState.IN_FLIGHT
            record = replace(
                record,
                state=RecordState.IN_FLIGHT,
                token=record.token + 1,
                lease_expires_at=now + self.lease,
            )
            self._records[event_id] = record
            return Claim(ClaimOutcome.CLAIMED, event_id, token=record.token, taken_over=taken_over)

    async def commit(
        self,
        event_id: str,
        token: int,
        status: int,
        work: Sequence[TransactionalWork] = (),
    ) -> bool:
        async with self._lock:
            record = self._records.get(event_id)
            if record is None or record.state is not RecordState.IN_FLIGHT:
                return False
            if record.token != token:
                return False
            transaction = StoreTransaction(self.store)
            for item in work:
                result = item(transaction)
                if asyncio.iscoroutine(result):
                    await result
            transaction.apply()
            self._records[event_id] = replace(
                record,
                state=RecordState.COMMITTED,
                status=status,
                effects=record.effects + 1,
                lease_expires_at=None,
                committed_at=self._clock(),
            )
            return True

    async def release(self, event_id: str, token: int) -> bool:
        async with self._lock:
            record = self._records.get(event_id)
            if record is None or record.state is not RecordState.IN_FLIGHT:
                return False
            if record.token != token:
                return False
            self._records[event_id] = replace(record, state=RecordState.RELEASED)
            return True

    async def lookup(self, event_id: str) -> InboxRecord | None:
        return self._records.get(event_id)

    async def purge(self, committed_before: datetime) -> int:
        async with self._lock:
            doomed = [
                event_id
                for event_id, record in self._records.items()
                if record.committed_at is not None and record.committed_at < committed_before
            ]
            for event_id in doomed:
                del self._records[event_id]
            return len(doomed)

    async def close(self) -> None:
        return None
