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
from receiver.inbox.memory import MemoryInbox

__all__ = [
    "DEFAULT_LEASE",
    "Claim",
    "ClaimOutcome",
    "Clock",
    "Inbox",
    "InboxRecord",
    "MemoryInbox",
    "RecordState",
    "TransactionalWork",
    "utc_now",
]
