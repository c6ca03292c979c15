"""Classification profiles: what a policy does with each outcome an attempt can have.

A profile is data: an ordered table of :class:`StatusRule` (first match wins) for HTTP answers,
one :class:`Verdict` per transport failure kind, and a default for statuses no rule names. Two
profiles are built in (:data:`PROFILES`):

``strict`` (quarantine what retrying cannot repair)
    2xx delivered; 401/403 → ``authentication_policy``; 409 → quarantined as
    ``permanent_response`` (a generic sender must not invent success semantics for it); 410 and
    every other 4xx → ``permanent_response``; 429 retried, honoring a valid ``Retry-After``;
    5xx retried; anything else (1xx/3xx) → ``permanent_response``.
``schedule`` (a fixed schedule; only 410 is final)
    2xx delivered; 410 → ``permanent_response``; every other answer retried on the schedule
    (``Retry-After`` not consulted: the schedule decides). A policy with it allows at most ten
    total attempts.

In both, every transport failure is retried. Timeouts and other network errors (a reset, a
connection closed without an answer) are *ambiguous*: the request may have reached the receiver,
which may have committed it. DNS, TLS and connection failures (refused, unreachable) are not: the
request never reached the receiver. :func:`parse_retry_after` reads ``Retry-After`` as
delay-seconds or an HTTP date; anything else is invalid and ignored.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

from sender_sim.exceptions import ConfigurationError
from sender_sim.records import DeadLetterReason, OutcomeKind

__all__ = [
    "PROFILES",
    "SCHEDULE",
    "STRICT",
    "Action",
    "Outcome",
    "Profile",
    "StatusRule",
    "Verdict",
    "parse_retry_after",
    "profile_named",
]

_MAX_RETRY_AFTER_DIGITS = 10


class Action(enum.StrEnum):
    DELIVERED = "delivered"
    RETRY = "retry"
    DEAD_LETTER = "dead_letter"


@dataclass(frozen=True)
class Outcome:
    """What one attempt observed: a status (for ``RESPONSE``) or a transport failure kind."""

    kind: OutcomeKind
    status: int | None = None
    retry_after: str | None = None
    sample: str = ""
    error: str = ""

    @classmethod
    def response(cls, status: int, retry_after: str | None = None, sample: str = "") -> Outcome:
        return cls(OutcomeKind.RESPONSE, status, retry_after, sample)

    @classmethod
    def failure(cls, kind: OutcomeKind, error: str = "") -> Outcome:
        return cls(kind, error=error)


@dataclass(frozen=True)
class Verdict:
    """What a policy does with an outcome; ``classification`` is its label in metrics."""

    classification: str
    action: Action
    reason: DeadLetterReason | None = None
    honor_retry_after: bool = False
    ambiguous: bool = False


@dataclass(frozen=True)
class StatusRule:
    """HTTP statuses ``low..high`` (inclusive) map to ``verdict``."""

    low: int
    high: int
    verdict: Verdict

    def matches(self, status: int) -> bool:
        return self.low <= status <= self.high


_NEVER_SENT = frozenset({OutcomeKind.DNS, OutcomeKind.TLS, OutcomeKind.CONNECT})
"""Failures before the request left: the receiver cannot have committed anything."""

_AMBIGUOUS: Mapping[OutcomeKind, Verdict] = {
    kind: Verdict(kind.value, Action.RETRY, ambiguous=kind not in _NEVER_SENT)
    for kind in OutcomeKind
    if kind is not OutcomeKind.RESPONSE
}
_DELIVERED = Verdict("success", Action.DELIVERED)
_PERMANENT = DeadLetterReason.PERMANENT_RESPONSE


@dataclass(frozen=True)
class Profile:
    """A classification table: status rules (first match wins), failure verdicts, a default."""

    name: str
    rules: tuple[StatusRule, ...]
    default: Verdict
    failures: Mapping[OutcomeKind, Verdict] = field(default_factory=lambda: dict(_AMBIGUOUS))
    max_attempts: int | None = None
    """The most total attempts a policy with this profile may allow (``None``: no cap)."""

    def classify(self, outcome: Outcome) -> Verdict:
        if outcome.kind is not OutcomeKind.RESPONSE:
            return self.failures.get(outcome.kind, _AMBIGUOUS[OutcomeKind.NETWORK])
        status = outcome.status if outcome.status is not None else 0
        for rule in self.rules:
            if rule.matches(status):
                return rule.verdict
        return self.default


STRICT = Profile(
    name="strict",
    rules=(
        StatusRule(200, 299, _DELIVERED),
        StatusRule(
            401,
            401,
            Verdict("authentication", Action.DEAD_LETTER, DeadLetterReason.AUTHENTICATION_POLICY),
        ),
        StatusRule(
            403,
            403,
            Verdict("authentication", Action.DEAD_LETTER, DeadLetterReason.AUTHENTICATION_POLICY),
        ),
        StatusRule(409, 409, Verdict("conflict", Action.DEAD_LETTER, _PERMANENT)),
        StatusRule(410, 410, Verdict("gone", Action.DEAD_LETTER, _PERMANENT)),
        StatusRule(429, 429, Verdict("rate_limited", Action.RETRY, honor_retry_after=True)),
        StatusRule(400, 499, Verdict("client_error", Action.DEAD_LETTER, _PERMANENT)),
        StatusRule(500, 599, Verdict("server_error", Action.RETRY)),
    ),
    default=Verdict("unexpected_status", Action.DEAD_LETTER, _PERMANENT),
)
"""Strict: quarantine what retrying cannot repair; retry only what may heal."""

SCHEDULE = Profile(
    name="schedule",
    rules=(
        StatusRule(200, 299, _DELIVERED),
        StatusRule(410, 410, Verdict("gone", Action.DEAD_LETTER, _PERMANENT)),
        StatusRule(429, 429, Verdict("rate_limited", Action.RETRY)),
        StatusRule(400, 499, Verdict("client_error", Action.RETRY)),
        StatusRule(500, 599, Verdict("server_error", Action.RETRY)),
    ),
    default=Verdict("unexpected_status", Action.RETRY),
    max_attempts=10,
)
"""Schedule: every non-2xx answer is retried on the schedule, except 410; at most ten total
attempts."""

PROFILES: Mapping[str, Profile] = {p.name: p for p in (STRICT, SCHEDULE)}


def profile_named(name: str) -> Profile:
    """The built-in profile ``strict`` or ``schedule``."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ConfigurationError(
            f"unknown classification profile {name!r}; choose one of {', '.join(PROFILES)}"
        ) from None


def parse_retry_after(value: str | None, now: datetime) -> timedelta | None:
    """The delay a ``Retry-After`` value asks for, or ``None`` when absent or invalid.

    Delay-seconds must be ASCII digits only; an HTTP date must carry a timezone (``GMT``) and one
    in the past means "now" (a zero delay).
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if text.isascii() and text.isdigit():
        if len(text) > _MAX_RETRY_AFTER_DIGITS:
            return None
        return timedelta(seconds=int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(timedelta(0), when.astimezone(UTC) - now)
