"""Repeated handler failures made visible: a bounded count of failures per event id.

A handler that fails on every copy of one event (a poison message) would otherwise only show as
a stream of 503s while the sender retries until its deadline. :class:`FailureCounts` remembers,
per event id, how many times the handler failed (raised, sent no response, or its transactional
work failed at commit); the middleware writes one log line per failure carrying that count, and
the probe reports it as ``handler_failures``.

The counts live in the process (they are diagnostics, not durable state) and are bounded: past
``capacity`` events the least recently failed one is forgotten.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

__all__ = ["DEFAULT_CAPACITY", "FailureCounts"]

DEFAULT_CAPACITY: Final = 10_000


class FailureCounts:
    """Handler failures per event id, for the most recent ``capacity`` failing events."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._counts: OrderedDict[str, int] = OrderedDict()

    def record(self, event_id: str) -> int:
        """Count one more failure of ``event_id``; how many it has had so far."""
        count = self._counts.pop(event_id, 0) + 1
        self._counts[event_id] = count
        if len(self._counts) > self.capacity:
            self._counts.popitem(last=False)
        return count

    def __call__(self, event_id: str) -> int:
        """How many times the handler failed on ``event_id`` (0 if never, or forgotten)."""
        return self._counts.get(event_id, 0)
