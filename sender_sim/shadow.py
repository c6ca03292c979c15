"""Shadow mode: what our state machine would have decided at each attempt of an existing worker.

The input is a log of another worker's attempts, one JSON object per line (a *shadow record*)::

    {"delivery_id": "d1", "attempt": 2,
     "scheduled_at": "2026-08-13T09:00:05Z", "started_at": "2026-08-13T09:00:05.1Z",
     "ended_at": "2026-08-13T09:00:07Z", "deadline_at": "2026-08-13T10:00:00Z",
     "status": 503, "retry_after": "30",
     "decision": "retry", "next_at": "2026-08-13T09:00:37Z"}

``delivery_id``, ``attempt`` (1-based, the lifetime count), ``ended_at``, ``deadline_at`` and
``decision`` (``delivered``, ``retry`` or ``dead_letter``) are required; the outcome is ``status``
(an HTTP status) or, when there was no answer, ``error`` (``timeout``, ``dns``, ``tls``,
``connect`` or ``network``); ``retry_after`` is the answer's header, if any; ``reason`` names a
dead-letter reason and ``next_at`` a retry's due time; ``scheduled_at`` (default ``started_at``)
and ``started_at`` (default ``ended_at``) are when the attempt was due and began. Times are
RFC 3339 with a timezone.

:func:`shadow` runs each record through the same pure transitions the worker uses (nothing is
sent, nothing is stored) and reports every :class:`Disagreement`: retry versus dead letter (or
delivered), another dead-letter reason, a retry due at another time (beyond ``tolerance``; under
full jitter, outside the interval our backoff could draw), or a retry whose due time cannot fit
the deadline rule.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sender_sim.classify import Outcome
from sender_sim.exceptions import ConfigurationError
from sender_sim.policy import FullJitter, Policy
from sender_sim.records import DeadLetterReason, Delivery, OutcomeKind, State, rfc3339
from sender_sim.transitions import settle

__all__ = ["DECISIONS", "Disagreement", "ShadowRecord", "parse_records", "shadow"]

DECISIONS = ("delivered", "retry", "dead_letter")
_ACTION = {State.DELIVERED: "delivered", State.SCHEDULED: "retry", State.DEAD_LETTER: "dead_letter"}


@dataclass(frozen=True)
class ShadowRecord:
    """One attempt of the existing worker, with its decision."""

    line: int
    delivery_id: str
    attempt: int
    scheduled_at: datetime
    started_at: datetime
    ended_at: datetime
    deadline_at: datetime
    outcome: Outcome
    decision: str
    reason: str | None = None
    next_at: datetime | None = None


@dataclass(frozen=True)
class Disagreement:
    """Where our decision differs from theirs (``kind``: ``decision``, ``reason``, ``next_at``
    or ``deadline``)."""

    record: ShadowRecord
    kind: str
    theirs: str
    ours: str
    explanation: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "line": self.record.line,
            "delivery_id": self.record.delivery_id,
            "attempt": self.record.attempt,
            "kind": self.kind,
            "theirs": self.theirs,
            "ours": self.ours,
            "explanation": self.explanation,
        }


def _time(document: Mapping[str, Any], key: str, line: int, default: datetime | None) -> datetime:
    value = document.get(key)
    if value is None:
        if default is None:
            raise ConfigurationError(f"line {line}: {key!r} is required")
        return default
    try:
        parsed = datetime.fromisoformat(str(value).replace("z", "Z"))
    except ValueError:
        raise ConfigurationError(f"line {line}: {key!r} is not an RFC 3339 time") from None
    if parsed.utcoffset() is None:
        raise ConfigurationError(f"line {line}: {key!r} has no timezone")
    return parsed


def _outcome(document: Mapping[str, Any], line: int) -> Outcome:
    status = document.get("status")
    retry_after = document.get("retry_after")
    if isinstance(status, int) and not isinstance(status, bool):
        return Outcome.response(status, None if retry_after is None else str(retry_after))
    error = str(document.get("error"))
    try:
        kind: OutcomeKind | None = OutcomeKind(error)
    except ValueError:
        kind = None
    if kind is None or kind is OutcomeKind.RESPONSE:
        raise ConfigurationError(
            f"line {line}: give 'status' (an HTTP status) or 'error' (timeout, dns, tls, "
            "connect or network)"
        )
    return Outcome.failure(kind)


def parse_records(lines: Iterable[str]) -> Iterator[ShadowRecord]:
    """The shadow records of a JSON-lines log (blank lines skipped)."""
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigurationError(f"line {number}: not JSON ({error.msg})") from None
        if not isinstance(document, dict):
            raise ConfigurationError(f"line {number}: not a JSON object")
        attempt = document.get("attempt")
        if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
            raise ConfigurationError(f"line {number}: 'attempt' must be a whole number >= 1")
        decision = document.get("decision")
        if decision not in DECISIONS:
            raise ConfigurationError(f"line {number}: 'decision' must be one of {DECISIONS}")
        delivery_id = document.get("delivery_id")
        if not isinstance(delivery_id, str) or not delivery_id:
            raise ConfigurationError(f"line {number}: 'delivery_id' is required")
        ended = _time(document, "ended_at", number, None)
        started = _time(document, "started_at", number, ended)
        next_at = document.get("next_at")
        yield ShadowRecord(
            line=number,
            delivery_id=delivery_id,
            attempt=attempt,
            scheduled_at=_time(document, "scheduled_at", number, started),
            started_at=started,
            ended_at=ended,
            deadline_at=_time(document, "deadline_at", number, None),
            outcome=_outcome(document, number),
            decision=decision,
            reason=document.get("reason"),
            next_at=None if next_at is None else _time(document, "next_at", number, None),
        )


class _Earliest(random.Random):
    """A draw that always takes the earliest time a jittered backoff allows: our decision is
    then "could we retry at all", and their due time is checked against the whole interval."""

    def randint(self, a: int, b: int) -> int:
        return a


def _leased(record: ShadowRecord, policy: Policy) -> Delivery:
    return Delivery(
        delivery_id=record.delivery_id,
        event_id="",
        endpoint_id="",
        destination_url="",
        payload_digest="",
        business_key=None,
        state=State.LEASED,
        deadline_at=record.deadline_at,
        attempt=record.attempt,
        max_attempts=policy.max_attempts,
        scheduled_for=record.scheduled_at,
        next_attempt_at=None,
        created_at=record.scheduled_at,
        updated_at=record.started_at,
        lease_owner="shadow",
        lease_expires_at=record.started_at + policy.lease_duration,
        fencing_token=1,
    )


def _window(
    record: ShadowRecord, policy: Policy, ours: datetime, honored: bool
) -> tuple[datetime, datetime]:
    """When our policy could have scheduled the retry."""
    if isinstance(policy.backoff, FullJitter) and not honored:
        return record.ended_at, record.ended_at + policy.backoff.ceiling(record.attempt)
    return ours, ours


def _check(record: ShadowRecord, policy: Policy, tolerance: timedelta) -> Disagreement | None:
    verdict = policy.profile.classify(record.outcome)
    step = settle(
        _leased(record, policy),
        record.outcome,
        verdict,
        worker="shadow",
        now=record.ended_at,
        policy=policy,
        rng=_Earliest(0),
    )
    after = step.delivery
    ours = _ACTION[after.state]
    reason = after.reason.value if after.reason else None
    if ours != record.decision:
        why = f" ({reason})" if reason else ""
        return Disagreement(
            record,
            "decision",
            record.decision + (f" ({record.reason})" if record.reason else ""),
            ours + why,
            f"classified {verdict.classification}: we would {ours.replace('_', ' ')}{why}",
        )
    if ours == "dead_letter" and record.reason is not None and record.reason != reason:
        return Disagreement(
            record,
            "reason",
            record.reason,
            reason or "",
            f"classified {verdict.classification}: our dead-letter reason is {reason}",
        )
    if ours != "retry" or record.next_at is None:
        return None
    assert after.next_attempt_at is not None
    honored = "retry_after_honored" in step.row.details
    low, high = _window(record, policy, after.next_attempt_at, honored)
    if not low - tolerance <= record.next_at <= high + tolerance:
        span = rfc3339(low) if low == high else f"{rfc3339(low)} .. {rfc3339(high)}"
        return Disagreement(
            record,
            "next_at",
            rfc3339(record.next_at),
            span,
            f"our next attempt would be due {span}",
        )
    if not policy.fits(record.next_at, record.deadline_at):
        return Disagreement(
            record,
            "deadline",
            f"retry at {rfc3339(record.next_at)}",
            f"dead_letter ({DeadLetterReason.DEADLINE_EXHAUSTED.value})",
            f"a retry at {rfc3339(record.next_at)} budgeted {policy.budget} cannot end before "
            f"the deadline {rfc3339(record.deadline_at)}",
        )
    return None


def shadow(
    records: Iterable[ShadowRecord], policy: Policy, *, tolerance: timedelta = timedelta(seconds=1)
) -> tuple[int, list[Disagreement]]:
    """How many records were compared, and every disagreement (nothing is sent)."""
    compared = 0
    found: list[Disagreement] = []
    for record in records:
        compared += 1
        disagreement = _check(record, policy, tolerance)
        if disagreement is not None:
            found.append(disagreement)
    return compared, found
