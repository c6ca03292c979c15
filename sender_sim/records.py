"""The simulator's records as plain, immutable data: events, deliveries, attempts, ledger rows,
redrive decisions, and the enumerations they use.

A :class:`Delivery` is one event to one endpoint; its ``state`` is one of :class:`State` and, in
``dead_letter``, ``reason`` is one of the five :class:`DeadLetterReason`. A :class:`LedgerRow` is
either a state change (``from_state``/``to_state`` set; the ledger of a delivery chains from
``None`` at publication to its current state) or a note that changed no state (a refused stale ack,
a fault that fired, a refused redrive: both states ``None``). Times are timezone-aware UTC datetimes
with microsecond precision; the helpers here convert them to and from integer microseconds (the
store's format) and RFC 3339 text.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sender_sim.exceptions import ConfigurationError

__all__ = [
    "DEFAULT_ENDPOINT_TIMEOUT",
    "EPOCH",
    "EVENT_ONLY_STATUSES",
    "Attempt",
    "DeadLetterReason",
    "Delivery",
    "Endpoint",
    "EndpointChange",
    "Event",
    "EventStatus",
    "LedgerRow",
    "OutcomeKind",
    "RedriveDecision",
    "State",
    "Versions",
    "format_duration",
    "from_us",
    "reason_named",
    "rfc3339",
    "to_us",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class State(enum.StrEnum):
    """Where a delivery is. Only an operator's redrive or resend moves ``dead_letter`` (or, for
    a resend, ``delivered``) back to ``scheduled``."""

    SCHEDULED = "scheduled"
    LEASED = "leased"
    DELIVERED = "delivered"
    DEAD_LETTER = "dead_letter"


class EventStatus(enum.StrEnum):
    """What became of an event that has no retained delivery (an *event-only* row).

    The first three record what the publisher observed when no callback could be scheduled:
    no endpoint configured at all, none active, or no active one subscribed to the event's type.
    ``history_unavailable``: the event's deliveries were removed with their endpoint; nothing is
    known of them and nothing is made up. None of them has an attempt or an automatic retry; only
    an explicit resend sends such an event (to the endpoints active and subscribed then).
    """

    NO_ENDPOINT = "no_endpoint"
    ENDPOINT_DISABLED = "endpoint_disabled"
    NOT_SUBSCRIBED = "not_subscribed"
    HISTORY_UNAVAILABLE = "history_unavailable"


EVENT_ONLY_STATUSES = tuple(status.value for status in EventStatus)


class DeadLetterReason(enum.StrEnum):
    """Why a delivery entered the dead-letter queue (five reasons)."""

    DEADLINE_EXHAUSTED = "deadline_exhausted"
    ATTEMPTS_EXHAUSTED = "attempts_exhausted"
    PERMANENT_RESPONSE = "permanent_response"
    AUTHENTICATION_POLICY = "authentication_policy"
    INVALID_ENVELOPE = "invalid_envelope"


def reason_named(name: str | DeadLetterReason) -> DeadLetterReason:
    """The dead-letter reason called ``name``, or :class:`ConfigurationError` naming the choices."""
    try:
        return DeadLetterReason(name)
    except ValueError:
        choices = ", ".join(r.value for r in DeadLetterReason)
        raise ConfigurationError(
            f"unknown dead-letter reason {name!r}; choose one of {choices}"
        ) from None


class OutcomeKind(enum.StrEnum):
    """What one attempt observed on the wire, before any policy judges it."""

    RESPONSE = "response"
    TIMEOUT = "timeout"
    DNS = "dns"
    TLS = "tls"
    CONNECT = "connect"
    NETWORK = "network"


def to_us(value: datetime) -> int:
    """Integer microseconds since the Unix epoch (exact; used by the store)."""
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int) -> datetime:
    """The UTC datetime ``value`` microseconds after the Unix epoch."""
    return EPOCH + timedelta(microseconds=value)


def rfc3339(value: datetime) -> str:
    """``2026-08-13T10:00:00.000000Z``: UTC, always six fractional digits."""
    v = value if value.tzinfo is UTC else value.astimezone(UTC)
    return (
        f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}:{v.second:02d}"
        f".{v.microsecond:06d}Z"
    )


def format_duration(delta: timedelta) -> str:
    """A short human duration: ``-14s``, ``1m40s``, ``6h``, ``2d3h``, ``0.000001s``."""
    sign = "-" if delta < timedelta(0) else ""
    delta = abs(delta)
    total_us = delta // timedelta(microseconds=1)
    seconds, micros = divmod(total_us, 1_000_000)
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    parts = []
    if days:
        parts.append(f"{days}d")
    if hours:
        parts.append(f"{hours}h")
    if minutes:
        parts.append(f"{minutes}m")
    if micros:
        parts.append(f"{secs}.{micros:06d}".rstrip("0") + "s")
    elif secs or not parts:
        parts.append(f"{secs}s")
    return sign + "".join(parts)


DEFAULT_ENDPOINT_TIMEOUT = timedelta(seconds=5)


@dataclass(frozen=True)
class Endpoint:
    """Where deliveries go. ``secrets`` never leave this process: the store keeps a fingerprint.

    ``timeout`` bounds each request to this endpoint (the policy's timeout is a ceiling over it);
    ``event_types`` are its subscriptions (``None``: every type).
    """

    endpoint_id: str
    url: str
    scheme: str = "standard"
    active: bool = True
    secret_fingerprint: str = ""
    timeout: timedelta = DEFAULT_ENDPOINT_TIMEOUT
    event_types: tuple[str, ...] | None = None

    def subscribes(self, event_type: str) -> bool:
        """Whether this endpoint's subscriptions include ``event_type``."""
        return self.event_types is None or event_type in self.event_types


@dataclass(frozen=True)
class EndpointChange:
    """One entry of an endpoint's setup history: ``action`` is ``created``, ``changed``,
    ``disabled``, ``enabled`` or ``deleted``; ``before``/``after`` are the settings (URL, scheme,
    active, timeout, subscriptions and the secret's fingerprint, never a secret)."""

    endpoint_id: str
    at: datetime
    actor: str
    action: str
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None
    seq: int = 0


@dataclass(frozen=True)
class Versions:
    """What wrote a ledger row or an attempt: the retry policy, the envelope schema and the
    worker, each versioned on its own (a policy rollback never rewrites a stored message)."""

    policy: str
    envelope: str
    worker: str


@dataclass(frozen=True)
class Event:
    """One business event; ``body`` is the exact JSON bytes sent, ``digest`` its SHA-256 (hex).

    ``status`` is ``None`` while the event has retained deliveries, else its event-only
    :class:`EventStatus` (recorded at ``status_at``); ``deadline_at`` is the deadline it was
    published with.
    """

    event_id: str
    type: str
    business_key: str | None
    occurred_at: datetime
    body: bytes
    digest: str
    status: EventStatus | None = None
    status_at: datetime | None = None
    deadline_at: datetime | None = None


@dataclass(frozen=True)
class Delivery:
    """One event to one endpoint, with its scheduling, lease and dead-letter state.

    ``attempt`` counts attempts started (incremented when a lease is taken) over the delivery's
    whole life; ``max_attempts`` is this delivery's own limit (a redrive or a resend may raise it
    by one explicit attempt);
    ``scheduled_for`` is the due time of the current or last attempt (fixed schedules measure
    from it); ``dlq_reason`` keeps the last dead-letter reason after a redrive, for the audit;
    ``redrives`` and ``resends`` count the operator decisions that queued it again.
    """

    delivery_id: str
    event_id: str
    endpoint_id: str
    destination_url: str
    payload_digest: str
    business_key: str | None
    state: State
    deadline_at: datetime
    attempt: int
    max_attempts: int
    scheduled_for: datetime
    next_attempt_at: datetime | None
    created_at: datetime
    updated_at: datetime
    reason: DeadLetterReason | None = None
    dlq_reason: DeadLetterReason | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    fencing_token: int = 0
    last_outcome: str | None = None
    redrives: int = 0
    resends: int = 0


@dataclass(frozen=True)
class Attempt:
    """One send of a delivery: when, by whom, what came back and how the policy classified it.

    ``acked`` is ``False`` when the worker's compare-and-set was refused (its lease was stale: a
    lease-expiry duplicate) or when it crashed before persisting (then the row is written by the
    fault recorder, not the worker). ``response_sample`` holds at most 500 characters, secrets
    redacted.
    """

    delivery_id: str
    number: int
    worker: str
    fencing_token: int
    started_at: datetime
    ended_at: datetime
    kind: OutcomeKind
    classification: str
    status: int | None = None
    retry_after: str | None = None
    response_sample: str = ""
    error: str = ""
    acked: bool = True
    versions: Versions | None = None
    signed_at: int | None = None
    """The Unix second the attempt's signature carries."""


@dataclass(frozen=True)
class LedgerRow:
    """One row of the transition ledger: a state change, or a note (both states ``None``)."""

    delivery_id: str
    at: datetime
    from_state: State | None
    to_state: State | None
    actor: str
    cause: str
    reason: DeadLetterReason | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    seq: int = 0
    versions: Versions | None = None
    """What wrote the row (read back from the store; ``None`` before it is written)."""

    @property
    def is_state_change(self) -> bool:
        return self.to_state is not None


@dataclass(frozen=True)
class RedriveDecision:
    """An operator's redrive decision and its result (``queued`` or ``refused``)."""

    decision_id: int
    at: datetime
    actor: str
    reason: str
    scope: Mapping[str, Any]
    deadline_at: datetime
    result: str
    delivery_ids: tuple[str, ...]
    problems: tuple[Mapping[str, str], ...] = ()
