"""Clocks: the simulation clock that decides scheduling, and the wire clock that stamps signatures.

A clock is anything with ``now() -> datetime`` returning a timezone-aware UTC datetime: the one
:class:`~receiver.clock.Clock` protocol of the whole project, re-exported here.
:class:`RealClock` reads the system time; :class:`VirtualClock` only moves when told
(``advance``/``set``), so six hours of backoff take no wall time; :class:`SkewedClock` views
another clock shifted by a fixed offset (a worker whose clock runs fast or slow, or the wire clock
``real time + signature skew``); :class:`~receiver.clock.FreshWireClock` (re-exported) is real
time that never gives the same second twice. Times are never floats.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from receiver.clock import Clock, FreshWireClock, SystemClock
from sender_sim.exceptions import InvalidTime

__all__ = [
    "Clock",
    "FreshWireClock",
    "RealClock",
    "SkewedClock",
    "VirtualClock",
    "require_aware",
]


def require_aware(value: datetime, name: str = "time") -> datetime:
    """``value`` converted to UTC, or :class:`InvalidTime` when it has no timezone."""
    if not isinstance(value, datetime):
        raise InvalidTime(f"the {name} must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidTime(f"the {name} must be timezone-aware (e.g. UTC), got {value.isoformat()}")
    return value.astimezone(UTC)


class RealClock(SystemClock):
    """The system clock (:class:`receiver.clock.SystemClock` under the sender's name)."""

    def __repr__(self) -> str:
        return "RealClock()"


class VirtualClock:
    """A clock that moves only when advanced or set; it never goes backwards."""

    def __init__(self, start: datetime) -> None:
        self._now = require_aware(start, "virtual clock start")

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta) -> datetime:
        """Move forward by ``delta`` (not negative) and return the new time."""
        if delta < timedelta(0):
            raise InvalidTime("a virtual clock cannot go backwards")
        self._now += delta
        return self._now

    def set(self, when: datetime) -> datetime:
        """Jump to ``when`` (not earlier than now) and return it."""
        target = require_aware(when, "virtual clock target")
        if target < self._now:
            raise InvalidTime(
                f"a virtual clock cannot go backwards (now {self._now.isoformat()}, "
                f"asked {target.isoformat()})"
            )
        self._now = target
        return self._now

    def __repr__(self) -> str:
        return f"VirtualClock({self._now.isoformat()})"


class SkewedClock:
    """``base`` shifted by ``skew`` (positive: runs ahead)."""

    def __init__(self, base: Clock, skew: timedelta) -> None:
        self.base = base
        self.skew = skew

    def now(self) -> datetime:
        return self.base.now() + self.skew

    def __repr__(self) -> str:
        return f"SkewedClock({self.base!r}, {self.skew})"
