"""The state machine as pure functions over plain data: no I/O, no clock reads, no randomness of
their own (a seeded ``random.Random`` is passed in). The worker, the virtual-clock runner and the
hypothesis state machine all call these same functions; the store only persists what they return.

Each function returns a :class:`Step`: the delivery after the change and the ledger row that
records it (or ``None`` when there is nothing to do)::

    (published) ─► scheduled ─claim─► leased ─settle─► delivered
                       ▲                │  └──settle──► scheduled (retry)
                       │                └─────settle──► dead_letter(reason)
                       └──────── redrive ─────────────── dead_letter(reason)

``claim`` also takes over a leased delivery whose lease expired (the fencing token grows, so the
first holder's ack is refused), and refuses to start an attempt the deadline rule or the attempt
limit forbids — it dead-letters instead. No function here ever moves a dead letter except
:func:`redrive` and :func:`resend` (the operator's two decisions), and only :func:`resend` moves
a delivered one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sender_sim.classify import Action, Outcome, Verdict, parse_retry_after
from sender_sim.exceptions import InvalidTransition
from sender_sim.policy import Policy
from sender_sim.records import (
    DeadLetterReason,
    Delivery,
    Event,
    LedgerRow,
    State,
    format_duration,
    rfc3339,
)

__all__ = [
    "RELEASE_DELAY",
    "Step",
    "claim",
    "new_delivery",
    "redrive",
    "release",
    "resend",
    "settle",
]

RELEASE_DELAY = timedelta(minutes=1)
"""How long a claim released after a failed dispatch waits before it is due again."""


@dataclass(frozen=True)
class Step:
    """A delivery after one transition and the ledger row recording it."""

    delivery: Delivery
    row: LedgerRow


def _budget_details(policy: Policy, start: datetime, deadline: datetime) -> dict[str, Any]:
    return {
        "start": rfc3339(start),
        "would_end": rfc3339(start + policy.budget),
        "deadline": rfc3339(deadline),
        "budget": format_duration(policy.budget),
        "slack": format_duration(deadline - (start + policy.budget)),
    }


def _dead(
    before: Delivery,
    reason: DeadLetterReason,
    *,
    at: datetime,
    actor: str,
    cause: str,
    details: dict[str, Any],
    **changes: Any,
) -> Step:
    after = replace(
        before,
        state=State.DEAD_LETTER,
        reason=reason,
        dlq_reason=reason,
        next_attempt_at=None,
        lease_owner=None,
        lease_expires_at=None,
        updated_at=at,
        **changes,
    )
    row = LedgerRow(
        before.delivery_id, at, before.state, State.DEAD_LETTER, actor, cause, reason, details
    )
    return Step(after, row)


def _rescheduled(
    before: Delivery,
    next_at: datetime,
    *,
    at: datetime,
    actor: str,
    cause: str,
    details: dict[str, Any],
    **changes: Any,
) -> Step:
    """``leased → scheduled``: the lease let go, the delivery due again at ``next_at``."""
    after = replace(
        before,
        state=State.SCHEDULED,
        next_attempt_at=next_at,
        scheduled_for=next_at,
        lease_owner=None,
        lease_expires_at=None,
        updated_at=at,
        **changes,
    )
    row = LedgerRow(
        before.delivery_id, at, before.state, State.SCHEDULED, actor, cause, None, details
    )
    return Step(after, row)


def new_delivery(
    *,
    delivery_id: str,
    event: Event,
    endpoint_id: str,
    destination_url: str,
    deadline_at: datetime,
    now: datetime,
    policy: Policy,
    first_attempt_at: datetime | None = None,
    envelope_problem: str | None = None,
    actor: str = "publisher",
) -> Step:
    """A freshly published delivery: scheduled for its first attempt, or dead-lettered at once
    (``invalid_envelope`` before any send, ``deadline_exhausted`` when even the first attempt
    cannot fit)."""
    first = first_attempt_at if first_attempt_at is not None else now + policy.backoff.first_delay()
    blank = Delivery(
        delivery_id=delivery_id,
        event_id=event.event_id,
        endpoint_id=endpoint_id,
        destination_url=destination_url,
        payload_digest=event.digest,
        business_key=event.business_key,
        state=State.SCHEDULED,
        deadline_at=deadline_at,
        attempt=0,
        max_attempts=policy.max_attempts,
        scheduled_for=first,
        next_attempt_at=first,
        created_at=now,
        updated_at=now,
    )
    details = _budget_details(policy, first, deadline_at)
    details["policy"] = policy.name
    details["max_attempts"] = policy.max_attempts
    if envelope_problem is not None:
        details["problem"] = envelope_problem
        after = replace(
            blank,
            state=State.DEAD_LETTER,
            reason=DeadLetterReason.INVALID_ENVELOPE,
            dlq_reason=DeadLetterReason.INVALID_ENVELOPE,
            next_attempt_at=None,
        )
        row = LedgerRow(
            delivery_id,
            now,
            None,
            State.DEAD_LETTER,
            actor,
            "published_invalid",
            DeadLetterReason.INVALID_ENVELOPE,
            details,
        )
        return Step(after, row)
    if not policy.fits(first, deadline_at):
        after = replace(
            blank,
            state=State.DEAD_LETTER,
            reason=DeadLetterReason.DEADLINE_EXHAUSTED,
            dlq_reason=DeadLetterReason.DEADLINE_EXHAUSTED,
            next_attempt_at=None,
        )
        row = LedgerRow(
            delivery_id,
            now,
            None,
            State.DEAD_LETTER,
            actor,
            "published_too_late",
            DeadLetterReason.DEADLINE_EXHAUSTED,
            details,
        )
        return Step(after, row)
    row = LedgerRow(delivery_id, now, None, State.SCHEDULED, actor, "published", None, details)
    return Step(blank, row)


def claim(delivery: Delivery, *, worker: str, now: datetime, policy: Policy) -> Step | None:
    """Lease a due delivery (or take over an expired lease) for ``worker`` at the worker's ``now``.

    ``None`` when the delivery is not claimable at ``now``. When the attempt limit is spent or the
    deadline rule forbids starting now, the delivery dead-letters instead of being leased.
    """
    if delivery.state is State.SCHEDULED:
        due = delivery.next_attempt_at
        if due is None or due > now:
            return None
        cause = "leased"
    elif delivery.state is State.LEASED:
        expires = delivery.lease_expires_at
        if expires is None or expires > now:
            return None
        cause = "lease_taken_over"
    else:
        return None
    token = delivery.fencing_token + 1
    details: dict[str, Any] = {"worker": worker, "token": token}
    if delivery.state is State.LEASED:
        details["previous_owner"] = delivery.lease_owner or ""
        details["expired_at"] = rfc3339(expires)  # type: ignore[arg-type]
    if delivery.attempt >= delivery.max_attempts:
        details["attempts"] = delivery.attempt
        details["max_attempts"] = delivery.max_attempts
        return _dead(
            delivery,
            DeadLetterReason.ATTEMPTS_EXHAUSTED,
            at=now,
            actor=worker,
            cause="attempt_limit_at_claim",
            details=details,
            fencing_token=token,
        )
    if not policy.fits(now, delivery.deadline_at):
        details.update(_budget_details(policy, now, delivery.deadline_at))
        return _dead(
            delivery,
            DeadLetterReason.DEADLINE_EXHAUSTED,
            at=now,
            actor=worker,
            cause="late_start_refused",
            details=details,
            fencing_token=token,
        )
    expires_at = now + policy.lease_duration
    attempt = delivery.attempt + 1
    details.update(attempt=attempt, lease_expires_at=rfc3339(expires_at))
    details.update(_budget_details(policy, now, delivery.deadline_at))
    after = replace(
        delivery,
        state=State.LEASED,
        attempt=attempt,
        fencing_token=token,
        lease_owner=worker,
        lease_expires_at=expires_at,
        next_attempt_at=None,
        updated_at=now,
    )
    return Step(
        after,
        LedgerRow(
            delivery.delivery_id, now, delivery.state, State.LEASED, worker, cause, None, details
        ),
    )


def settle(
    delivery: Delivery,
    outcome: Outcome,
    verdict: Verdict,
    *,
    worker: str,
    now: datetime,
    policy: Policy,
    rng: random.Random,
) -> Step:
    """The transition after attempt ``delivery.attempt`` ended at ``now`` with ``outcome``.

    The caller persists it with a compare-and-set on the fencing token it leased with.
    """
    if delivery.state is not State.LEASED:
        raise InvalidTransition(f"settle needs a leased delivery, not {delivery.state}")
    details: dict[str, Any] = {
        "worker": worker,
        "token": delivery.fencing_token,
        "attempt": delivery.attempt,
        "outcome": outcome.kind.value,
        "classification": verdict.classification,
        "ambiguous": verdict.ambiguous,
    }
    if outcome.status is not None:
        details["status"] = outcome.status
    if outcome.error:
        details["error"] = outcome.error
    common: dict[str, Any] = {"last_outcome": verdict.classification}
    if verdict.action is Action.DELIVERED:
        after = replace(
            delivery,
            state=State.DELIVERED,
            reason=None,
            next_attempt_at=None,
            lease_owner=None,
            lease_expires_at=None,
            updated_at=now,
            **common,
        )
        row = LedgerRow(
            delivery.delivery_id,
            now,
            State.LEASED,
            State.DELIVERED,
            worker,
            "delivered",
            None,
            details,
        )
        return Step(after, row)
    if verdict.action is Action.DEAD_LETTER:
        assert verdict.reason is not None
        return _dead(
            delivery,
            verdict.reason,
            at=now,
            actor=worker,
            cause="terminal_outcome",
            details=details,
            **common,
        )
    if delivery.attempt >= delivery.max_attempts:
        details["max_attempts"] = delivery.max_attempts
        return _dead(
            delivery,
            DeadLetterReason.ATTEMPTS_EXHAUSTED,
            at=now,
            actor=worker,
            cause="attempts_exhausted",
            details=details,
            **common,
        )
    delay = parse_retry_after(outcome.retry_after, now) if verdict.honor_retry_after else None
    if delay is not None:
        next_at = now + delay
        details["retry_after"] = outcome.retry_after
        details["retry_after_honored"] = format_duration(delay)
    else:
        if verdict.honor_retry_after and outcome.retry_after is not None:
            details["retry_after_ignored"] = outcome.retry_after
        next_at = policy.backoff.next_at(delivery.attempt, delivery.scheduled_for, now, rng)
    details["next_at"] = rfc3339(next_at)
    details.update(_budget_details(policy, next_at, delivery.deadline_at))
    if not policy.fits(next_at, delivery.deadline_at):
        return _dead(
            delivery,
            DeadLetterReason.DEADLINE_EXHAUSTED,
            at=now,
            actor=worker,
            cause="next_attempt_past_deadline",
            details=details,
            **common,
        )
    return _rescheduled(
        delivery, next_at, at=now, actor=worker, cause="retry_scheduled", details=details, **common
    )


def release(delivery: Delivery, *, worker: str, now: datetime, error_type: str, error: str) -> Step:
    """``leased → scheduled`` after a dispatch that threw before it had an outcome.

    Only the claim is undone: the attempt the claim counted was never classified, so the count
    goes back and no attempt or result is recorded; the delivery is due again in
    :data:`RELEASE_DELAY` (the deadline rule decides at that claim, as always). The caller
    persists it guarded by the lease's fencing token, so a newer claim is never reset.
    ``error`` is the failure's message, already redacted.
    """
    if delivery.state is not State.LEASED:
        raise InvalidTransition(f"release needs a leased delivery, not {delivery.state}")
    next_at = now + RELEASE_DELAY
    details: dict[str, Any] = {
        "worker": worker,
        "token": delivery.fencing_token,
        "attempt": delivery.attempt,
        "error_type": error_type,
        "error": error,
        "next_at": rfc3339(next_at),
    }
    return _rescheduled(
        delivery,
        next_at,
        at=now,
        actor=worker,
        cause="dispatch_failed",
        details=details,
        attempt=delivery.attempt - 1,
    )


def redrive(
    delivery: Delivery,
    *,
    actor: str,
    reason: str,
    deadline_at: datetime,
    now: datetime,
    policy: Policy,
    decision_id: int,
) -> Step | None:
    """``dead_letter → scheduled`` (due now, fresh deadline, one explicit attempt even past the
    limit); ``None`` unless the delivery is a dead letter and the attempt fits the new deadline."""
    if delivery.state is not State.DEAD_LETTER or not policy.fits(now, deadline_at):
        return None
    limit = max(delivery.max_attempts, delivery.attempt + policy.redrive_extra_attempts)
    details: dict[str, Any] = {
        "decision_id": decision_id,
        "reason": reason,
        "previous_reason": delivery.reason.value if delivery.reason else "",
        "previous_deadline": rfc3339(delivery.deadline_at),
        "new_deadline": rfc3339(deadline_at),
        "max_attempts": limit,
        "attempts_so_far": delivery.attempt,
    }
    details.update(_budget_details(policy, now, deadline_at))
    after = replace(
        delivery,
        state=State.SCHEDULED,
        reason=None,
        deadline_at=deadline_at,
        max_attempts=limit,
        next_attempt_at=now,
        scheduled_for=now,
        redrives=delivery.redrives + 1,
        updated_at=now,
    )
    row = LedgerRow(
        delivery.delivery_id,
        now,
        State.DEAD_LETTER,
        State.SCHEDULED,
        actor,
        "redriven",
        None,
        details,
    )
    return Step(after, row)


def resend(
    delivery: Delivery,
    *,
    actor: str,
    deadline_at: datetime,
    now: datetime,
    policy: Policy,
) -> Step | None:
    """``delivered | dead_letter → scheduled``: one more real attempt, due now, of the same
    delivery (same event id and body; the attempt is signed afresh when sent).

    The lifetime attempt count is kept; the limit is raised only as far as one explicit attempt
    needs, so a failure at or above the old limit dead-letters again without a new automatic
    budget. ``None`` when the delivery is pending or in flight, or the attempt cannot fit
    ``deadline_at``.
    """
    if delivery.state not in (State.DELIVERED, State.DEAD_LETTER):
        return None
    if not policy.fits(now, deadline_at):
        return None
    limit = max(delivery.max_attempts, delivery.attempt + 1)
    details: dict[str, Any] = {
        "previous_state": delivery.state.value,
        "previous_reason": delivery.reason.value if delivery.reason else "",
        "attempts_so_far": delivery.attempt,
        "max_attempts": limit,
        "resends": delivery.resends + 1,
    }
    details.update(_budget_details(policy, now, deadline_at))
    after = replace(
        delivery,
        state=State.SCHEDULED,
        reason=None,
        deadline_at=deadline_at,
        max_attempts=limit,
        next_attempt_at=now,
        scheduled_for=now,
        resends=delivery.resends + 1,
        updated_at=now,
    )
    row = LedgerRow(
        delivery.delivery_id, now, delivery.state, State.SCHEDULED, actor, "resent", None, details
    )
    return Step(after, row)
