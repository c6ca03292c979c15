"""The durable ``event_id`` inbox: one contract, several backends (memory, SQLite, PostgreSQL)."""

from receiver.inbox.contract import (
    DEFAULT_LEASE,
    Claim,
    ClaimOutcome,
    Clock,
    Inbox,
    InboxRecord,
    RecordState,
    TransactionalWork,
    utc_now,
)
from receiver.inbox.factory import open_inbox
from receiver.inbox.memory import MemoryInbox
from receiver.inbox.sqlite import SqliteInbox, SqliteInsert

__all__ = [
    "DEFAULT_LEASE",
    "Claim",
    "ClaimOutcome",
    "Clock",
    "Inbox",
    "InboxRecord",
    "MemoryInbox",
    "RecordState",
    "SqliteInbox",
    "SqliteInsert",
    "TransactionalWork",
    "open_inbox",
    "utc_now",
]
