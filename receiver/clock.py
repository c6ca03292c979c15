"""Clocks, one idea for the whole project: something whose ``now()`` is an aware UTC datetime.

:class:`Clock` is the protocol; :data:`system_clock` reads the system time. The sender's virtual
and skewed clocks (``sender_sim.clock``) implement the same protocol. Places that take a clock
accept a :class:`Clock`, and, as they always did, a plain callable: the inbox a callable returning
a datetime, the verifier one returning Unix seconds. :func:`datetime_source` and
:func:`seconds_source` turn any of these into the one call a hot path makes, once, at
construction.

The wire clock: signed timestamps of successive attempts must never repeat (a fresh signature
every time), even when two attempts fall within one second. :func:`next_fresh_second` is that
rule, and :class:`FreshWireClock` a clock built on it (real time, pushed ahead by at most one
second per reading).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = [
    "Clock",
    "ClockInput",
    "FreshWireClock",
    "SystemClock",
    "datetime_source",
    "next_fresh_second",
    "seconds_source",
    "system_clock",
    "unix_seconds",
]


@runtime_checkable
class Clock(Protocol):
    """Something that tells the time as a timezone-aware UTC datetime."""

    def now(self) -> datetime: ...


ClockInput = Clock | Callable[[], datetime]
"""What a component that keeps time accepts: a :class:`Clock`, or a callable returning one's
``now()`` (the inbox's historical form)."""


class SystemClock:
    """The system clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def __repr__(self) -> str:
        return "SystemClock()"


system_clock = SystemClock()
"""The one system clock instance."""


def _now_method(clock: object) -> Callable[[], datetime] | None:
    now = getattr(clock, "now", None)
    return now if callable(now) else None


def datetime_source(clock: ClockInput) -> Callable[[], datetime]:
    """The call that reads ``clock``: its ``now`` method, or ``clock`` itself if it is a
    callable without one."""
    now = _now_method(clock)
    if now is not None:
        return now
    if callable(clock):
        return clock
    raise TypeError(f"not a clock: {clock!r}")


def seconds_source(clock: Clock | Callable[[], float]) -> Callable[[], float]:
    """A call returning Unix seconds (a float) for ``clock``: ``time.time`` for the system
    clock, ``clock.now().timestamp()`` for another :class:`Clock`, or ``clock`` itself when it is
    a callable returning seconds (the verifier's historical form)."""
    if isinstance(clock, SystemClock):
        return time.time
    now = _now_method(clock)
    if now is not None:
        return lambda: now().timestamp()
    if callable(clock):
        return clock
    raise TypeError(f"not a clock: {clock!r}")


def unix_seconds(moment: datetime) -> int:
    """Whole Unix seconds (floored) of an aware datetime: what a signature's timestamp carries."""
    return math.floor(moment.timestamp())


def next_fresh_second(candidate: int, last: int | None, *, fresh: bool = True) -> int:
    """The timestamp to sign with: ``candidate``, or, when ``fresh`` and it would repeat (or go
    back before) the ``last`` one used, the second after ``last``."""
    if fresh and last is not None and candidate <= last:
        return last + 1
    return candidate


class FreshWireClock:
    """``base`` time (the system clock by default), but never the same second twice: every
    reading lands in a later whole second than the one before (so every attempt gets a fresh
    timestamp and signature), drifting ahead of ``base`` by at most one second per reading."""

    def __init__(self, base: Clock | None = None) -> None:
        self.base: Clock = base if base is not None else system_clock
        self._last: int | None = None

    def now(self) -> datetime:
        now = self.base.now()
        whole = unix_seconds(now)
        stamp = next_fresh_second(whole, self._last)
        self._last = stamp
        return now + timedelta(seconds=stamp - whole)

    def __repr__(self) -> str:
        return f"FreshWireClock({self.base!r})"
