"""Delivery policies as data: backoff, attempt limits, deadline budget, timeouts, classification.

Backoffs are pure: given the attempt just made, when it was scheduled and when it ended, they return
when the next one is due. :class:`FullJitter` draws an integer number of microseconds uniformly from
``[0, min(cap, base·2^(n-1))]`` with the injected, seeded ``random.Random`` (``n`` = attempts made),
measured from the end of the attempt. :class:`FixedSchedule` adds ``delays[n]`` (the last delay
repeating) to the preceding attempt's *scheduled* time, as a fixed retry schedule specifies.

The deadline rule (:meth:`Policy.fits`): an attempt may start at ``t`` iff
``t + expected_attempt_time + max_clock_skew < deadline`` — strictly, so equality dead-letters.

Built-in policies (:data:`POLICIES`): ``strict`` (full jitter base 5 s cap 900 s,
8 attempts, 30 s budget, 10 s timeout, strict profile) and ``schedule`` (0, 1 m, 5 m,
15 m, 1 h, 6 h then 6 h, 10 attempts, 5 s timeout, schedule profile).
"""

from __future__ import annotations

import functools
import hashlib
import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Protocol

from sender_sim.classify import SCHEDULE, STRICT, Profile
from sender_sim.exceptions import ConfigurationError

__all__ = [
    "POLICIES",
    "SEED_002_SCHEDULE",
    "Backoff",
    "FixedSchedule",
    "FullJitter",
    "Policy",
    "policy_named",
]

_US = timedelta(microseconds=1)


class Backoff(Protocol):
    """When the attempt after attempt ``made`` is due."""

    def first_delay(self) -> timedelta:
        """Delay of the first attempt after publication."""
        ...

    def next_at(
        self, made: int, scheduled_for: datetime, ended_at: datetime, rng: random.Random
    ) -> datetime:
        """Due time of attempt ``made + 1``."""
        ...


@dataclass(frozen=True)
class FullJitter:
    """Full-jitter exponential backoff: ``[0, min(cap, base·2^(made-1))]`` after the end."""

    base: timedelta = timedelta(seconds=5)
    cap: timedelta = timedelta(seconds=900)

    def __post_init__(self) -> None:
        if self.base <= timedelta(0) or self.cap < self.base:
            raise ConfigurationError("full jitter needs 0 < base <= cap")

    def ceiling(self, made: int) -> timedelta:
        """``min(cap, base·2^(made-1))``, computed in integer microseconds (no overflow)."""
        exponent = max(0, made - 1)
        cap_us = self.cap // _US
        if exponent >= cap_us.bit_length():
            return self.cap
        return timedelta(microseconds=min(cap_us, (self.base // _US) << exponent))

    def first_delay(self) -> timedelta:
        return timedelta(0)

    def next_at(
        self, made: int, scheduled_for: datetime, ended_at: datetime, rng: random.Random
    ) -> datetime:
        ceiling_us = self.ceiling(made) // _US
        return ended_at + timedelta(microseconds=rng.randint(0, ceiling_us))


@dataclass(frozen=True)
class FixedSchedule:
    """``delays[0]`` after publication, then ``delays[n]`` after attempt ``n``'s scheduled time."""

    delays: tuple[timedelta, ...]

    def __post_init__(self) -> None:
        if not self.delays or any(d < timedelta(0) for d in self.delays):
            raise ConfigurationError("a fixed schedule needs at least one non-negative delay")

    def delay_before(self, attempt: int) -> timedelta:
        """The delay before attempt ``attempt`` (1-based), measured from the one before."""
        return self.delays[min(attempt - 1, len(self.delays) - 1)]

    def first_delay(self) -> timedelta:
        return self.delays[0]

    def next_at(
        self, made: int, scheduled_for: datetime, ended_at: datetime, rng: random.Random
    ) -> datetime:
        return scheduled_for + self.delay_before(made + 1)


SEED_002_SCHEDULE = FixedSchedule(
    (
        timedelta(0),
        timedelta(minutes=1),
        timedelta(minutes=5),
        timedelta(minutes=15),
        timedelta(hours=1),
        timedelta(hours=6),
    )
)
"""The fixed schedule: immediate, +1 m, +5 m, +15 m, +1 h, +6 h, then +6 h again."""


@dataclass(frozen=True)
class Policy:
    """Everything that decides a delivery's fate, as one immutable value."""

    name: str = "strict"
    backoff: FullJitter | FixedSchedule = field(default_factory=FullJitter)
    max_attempts: int = 8
    expected_attempt_time: timedelta = timedelta(seconds=30)
    max_clock_skew: timedelta = timedelta(0)
    timeout: timedelta = timedelta(seconds=10)
    lease_duration: timedelta = timedelta(seconds=60)
    profile: Profile = STRICT
    redrive_extra_attempts: int = 1
    max_body_bytes: int = 256 * 1024

    def __post_init__(self) -> None:
        if not 1 <= self.max_attempts <= 1000:
            raise ConfigurationError("max_attempts must be between 1 and 1000")
        cap = self.profile.max_attempts
        if cap is not None and self.max_attempts > cap:
            raise ConfigurationError(
                f"the {self.profile.name} profile allows at most {cap} total attempts, "
                f"not {self.max_attempts}"
            )
        if self.expected_attempt_time < timedelta(0) or self.max_clock_skew < timedelta(0):
            raise ConfigurationError("expected_attempt_time and max_clock_skew must be >= 0")
        if self.timeout <= timedelta(0):
            raise ConfigurationError("the request timeout must be positive")
        if self.lease_duration <= self.timeout:
            raise ConfigurationError("the lease must outlast the request timeout")
        if self.redrive_extra_attempts < 1:
            raise ConfigurationError("a redrive grants at least one explicit attempt")
        if self.max_body_bytes < 2:
            raise ConfigurationError("max_body_bytes is too small")

    @functools.cached_property
    def version(self) -> str:
        """``strict@1a2b3c4d``: the name and a digest of every field, so any change to a policy
        (not only a rename) gives it another version in the ledger."""
        digest = hashlib.sha256(repr(self).encode()).hexdigest()[:8]
        return f"{self.name}@{digest}"

    @property
    def budget(self) -> timedelta:
        """``expected_attempt_time + max_clock_skew``: what must fit before the deadline."""
        return self.expected_attempt_time + self.max_clock_skew

    def fits(self, start: datetime, deadline: datetime) -> bool:
        """The deadline rule: ``start + expected_attempt_time + max_clock_skew < deadline``."""
        return start + self.budget < deadline

    def with_(self, **changes: object) -> Policy:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)  # type: ignore[arg-type]


POLICIES: Mapping[str, Policy] = {
    "strict": Policy(),
    "schedule": Policy(
        name="schedule",
        backoff=SEED_002_SCHEDULE,
        max_attempts=10,
        timeout=timedelta(seconds=5),
        profile=SCHEDULE,
    ),
}


def policy_named(name: str) -> Policy:
    """The built-in policy ``strict`` or ``schedule``."""
    try:
        return POLICIES[name]
    except KeyError:
        raise ConfigurationError(
            f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}"
        ) from None
