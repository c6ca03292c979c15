"""``explain``: a delivery's whole story in plain words, from its ledger, attempts and decisions.

Every ledger row becomes one line (time, actor, what happened and why, with the deadline budget
where it mattered); the attempts follow as a table; then the redrive decisions that touched the
delivery. The wording is data: :data:`SENTENCES` maps each ledger cause to a template over the
row's details. This backs ``hookproof explain DELIVERY_ID``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from receiver.redaction import shown_url
from sender_sim.records import (
    Attempt,
    Delivery,
    Event,
    LedgerRow,
    RedriveDecision,
    format_duration,
    rfc3339,
)

__all__ = ["SENTENCES", "explain_text"]

_NEVER_SENT = frozenset({"dns", "tls", "connect"})


def _answer(d: Mapping[str, Any]) -> str:
    if "status" in d and d["status"] not in (None, ""):
        text = f"answered HTTP {d['status']}"
    else:
        text = f"ended with {d.get('outcome', 'no answer')}"
        if d.get("error"):
            text += f" ({d['error']})"
    text += f", classified {d.get('classification', '?')}"
    if d.get("ambiguous"):
        text += " (ambiguous: the receiver may have committed it)"
    elif d.get("outcome") in _NEVER_SENT:
        text += " (the request never reached the receiver)"
    return text


def _attempt(d: Mapping[str, Any]) -> str:
    return f"attempt {d.get('attempt', '?')} by {d.get('worker', '?')} {_answer(d)}"


def _too_late(d: Mapping[str, Any]) -> str:
    return (
        f"an attempt at {d.get('start')} budgeted {d.get('budget')} would end by "
        f"{d.get('would_end')}, not before the deadline {d.get('deadline')}"
    )


def _retry(d: Mapping[str, Any]) -> str:
    text = f"{_attempt(d)}; retry scheduled for {d.get('next_at')}"
    if d.get("retry_after_honored"):
        text += f" (Retry-After {d.get('retry_after')!s} honored)"
    elif d.get("retry_after_ignored"):
        text += f" (invalid Retry-After {d.get('retry_after_ignored')!r} ignored)"
    return text + (
        f"; it would end by {d.get('would_end')}, {d.get('slack')} before the deadline "
        f"{d.get('deadline')}"
    )


def _fault(d: Mapping[str, Any]) -> str:
    fault = d.get("fault", {})
    kind = fault.get("kind", "?") if isinstance(fault, dict) else "?"
    text = f"FAULT injected: {kind}"
    if "attempt" in d:
        text += f" on attempt {d['attempt']}"
    if isinstance(fault, dict) and fault.get("skew_s"):
        text += f" (skew {fault['skew_s']:+g} s"
        text += f"; true time {d['true_time']})" if "true_time" in d else ")"
    if "status" in d:
        text += f" (the receiver's answer was {d['status']})"
    return text


Sentence = Callable[[LedgerRow, Mapping[str, Any]], str]

SENTENCES: Mapping[str, Sentence] = {
    "published": lambda r, d: (
        f"published under policy {d.get('policy')}; first attempt due {d.get('start')}, budgeted "
        f"{d.get('budget')}: must end by {d.get('would_end')}, {d.get('slack')} before the "
        f"deadline {d.get('deadline')} -> scheduled"
    ),
    "published_invalid": lambda r, d: (
        f"published, but the envelope is invalid ({d.get('problem')}) -> dead letter "
        "(invalid_envelope) before any send"
    ),
    "published_too_late": lambda r, d: (
        f"published, but {_too_late(d)} -> dead letter (deadline_exhausted) before any send"
    ),
    "leased": lambda r, d: (
        f"leased to {d.get('worker')} (fencing token {d.get('token')}, lease until "
        f"{d.get('lease_expires_at')}); attempt {d.get('attempt')} starts, budgeted to end by "
        f"{d.get('would_end')}, {d.get('slack')} before the deadline"
    ),
    "lease_taken_over": lambda r, d: (
        f"the lease of {d.get('previous_owner')} expired at {d.get('expired_at')}; "
        f"{d.get('worker')} took the delivery over (fencing token {d.get('token')}); attempt "
        f"{d.get('attempt')} starts (same delivery id: a possible duplicate for the receiver)"
    ),
    "attempt_limit_at_claim": lambda r, d: (
        f"not started: {d.get('attempts')} attempts already made of {d.get('max_attempts')} "
        "-> dead letter (attempts_exhausted)"
    ),
    "late_start_refused": lambda r, d: (
        f"not started: {_too_late(d)} -> dead letter (deadline_exhausted); no optimistic attempt"
    ),
    "delivered": lambda r, d: f"{_attempt(d)} -> delivered",
    "terminal_outcome": lambda r, d: (
        f"{_attempt(d)} -> dead letter ({r.reason.value if r.reason else '?'}): "
        "retrying cannot repair it"
    ),
    "attempts_exhausted": lambda r, d: (
        f"{_attempt(d)}; that was the last of {d.get('max_attempts')} attempts "
        "-> dead letter (attempts_exhausted)"
    ),
    "retry_scheduled": lambda r, d: f"{_retry(d)} -> scheduled",
    "next_attempt_past_deadline": lambda r, d: (
        f"{_attempt(d)}; the next attempt would be due {d.get('next_at')}, and {_too_late(d)} "
        "-> dead letter (deadline_exhausted)"
    ),
    "redriven": lambda r, d: (
        f"REDRIVE by {r.actor} (decision {d.get('decision_id')}), reason: "
        f'"{d.get("reason")}"; was dead letter ({d.get("previous_reason")}); deadline '
        f"{d.get('previous_deadline')} -> {d.get('new_deadline')}; due now, up to attempt "
        f"{d.get('max_attempts')} -> scheduled"
    ),
    "redrive_refused": lambda r, d: (
        f"redrive REFUSED (decision {d.get('decision_id')}) requested by {r.actor}, reason "
        f'"{d.get("reason")}": {d.get("problems")}'
    ),
    "stale_ack_refused": lambda r, d: (
        f"{r.actor}'s ack of attempt {d.get('attempt')} (fencing token {d.get('token')}, answer "
        f"{d.get('status')}) REFUSED: its lease had expired and been taken over "
        f"(a lease-expiry duplicate; it would have made the delivery {d.get('would_have')})"
    ),
    "claim_race_lost": lambda r, d: (
        f"{r.actor} lost the race for this claim to {d.get('winner')} (compare-and-set)"
    ),
    "lease_expired_in_flight": lambda r, d: (
        f"the lease of {d.get('worker')} (fencing token {d.get('token')}) expired while its "
        "request was in flight"
    ),
    "endpoint_disabled": lambda r, d: (
        f"endpoint {d.get('endpoint_id')} is disabled: "
        + (
            f"the attempt due {d['due']} is not sent"
            if d.get("due")
            else f"the lease until {d.get('lease_expires_at')} is neither taken over nor resent"
        )
        + " while the endpoint is disabled (held, not dropped)"
    ),
    "endpoint_enabled": lambda r, d: (
        f"endpoint {d.get('endpoint_id')} is enabled again: automatic attempts resume"
    ),
    "dispatch_failed": lambda r, d: (
        f"attempt {d.get('attempt')} by {d.get('worker')} raised {d.get('error_type')} before "
        f"it had an outcome ({d.get('error')}): its claim is released, no attempt counted or "
        f"recorded; due again {d.get('next_at')} -> scheduled"
    ),
    "release_refused": lambda r, d: (
        f"{r.actor}'s release of a failed dispatch (fencing token {d.get('token')}) REFUSED: a "
        "newer claim holds the delivery"
    ),
    "resent": lambda r, d: (
        f"RESEND requested by {r.actor}: was {d.get('previous_state')}"
        + (f" ({d['previous_reason']})" if d.get("previous_reason") else "")
        + f" after {d.get('attempts_so_far')} attempt(s); one more real attempt of the same "
        f"event, due now, signed afresh, up to attempt {d.get('max_attempts')}; deadline "
        f"{d.get('deadline')} -> scheduled"
    ),
    "resent_new": lambda r, d: (
        f"RESEND requested by {r.actor}: a new delivery of event {d.get('resent_event')} to "
        f"this endpoint, active and subscribed now; first attempt due {d.get('start')}, "
        f"deadline {d.get('deadline')} -> scheduled"
    ),
    "copies_sent": lambda r, d: (
        f"attempt {d.get('attempt')} went out as several identical copies; answers "
        f"{d.get('answers')}"
    ),
}


def _line(row: LedgerRow) -> str:
    details = row.details
    if row.cause.startswith("fault:"):
        text = _fault(details)
    else:
        sentence = SENTENCES.get(row.cause)
        text = sentence(row, details) if sentence else f"{row.cause}: {dict(details)}"
    who = f"[{row.actor}]"
    return f"  {rfc3339(row.at)}  {who:<22} {text}"


def _attempt_line(attempt: Attempt) -> str:
    if attempt.status is not None:
        answer = f"HTTP {attempt.status}"
    else:
        answer = attempt.kind.value + (f" ({attempt.error})" if attempt.error else "")
    ack = "acked" if attempt.acked else "NOT acked"
    line = (
        f"  #{attempt.number}  {rfc3339(attempt.started_at)} -> {rfc3339(attempt.ended_at)}  "
        f"{attempt.worker} (token {attempt.fencing_token})  {answer}, "
        f"{attempt.classification}, {ack}"
    )
    if attempt.versions is not None:
        v = attempt.versions
        line += f"\n        versions: policy {v.policy}, envelope {v.envelope}, worker {v.worker}"
    if attempt.response_sample:
        line += f"\n        sample: {attempt.response_sample[:120]!r}"
    return line


def explain_text(
    delivery: Delivery,
    event: Event,
    ledger: Sequence[LedgerRow],
    attempts: Sequence[Attempt],
    decisions: Sequence[RedriveDecision],
    *,
    now: datetime,
    budget_text: str,
) -> str:
    """The plain-words story of one delivery."""
    state = delivery.state.value
    if delivery.reason is not None:
        state += f" ({delivery.reason.value})"
    left = delivery.deadline_at - now
    lines = [
        f"Delivery {delivery.delivery_id}",
        f"  event:     {event.event_id} ({event.type})"
        + (f", business key {event.business_key}" if event.business_key else ""),
        f"  endpoint:  {delivery.endpoint_id} -> {shown_url(delivery.destination_url)}",
        f"  payload:   sha256 {delivery.payload_digest} ({len(event.body)} bytes, "
        "identical on every attempt)",
        f"  state:     {state}; {delivery.attempt} attempt(s) of at most "
        f"{delivery.max_attempts}; {delivery.redrives} redrive(s), {delivery.resends} resend(s)",
        f"  deadline:  {rfc3339(delivery.deadline_at)} ("
        + (f"{format_duration(left)} left" if left > left.__class__(0) else "passed")
        + f" at {rfc3339(now)} on the simulation clock; each attempt budgeted {budget_text})",
    ]
    if delivery.next_attempt_at is not None:
        lines.append(f"  next:      attempt due {rfc3339(delivery.next_attempt_at)}")
    if delivery.lease_owner:
        lines.append(
            f"  lease:     held by {delivery.lease_owner} (token {delivery.fencing_token}) until "
            f"{rfc3339(delivery.lease_expires_at) if delivery.lease_expires_at else '?'}"
        )
    lines.append("")
    lines.append("Story:")
    lines.extend(_line(row) for row in ledger)
    lines.append("")
    lines.append("Attempts:")
    lines.extend(_attempt_line(a) for a in attempts)
    if not attempts:
        lines.append("  (none sent)")
    mine = [d for d in decisions if delivery.delivery_id in d.delivery_ids]
    if mine:
        lines.append("")
        lines.append("Redrive decisions:")
        for d in mine:
            lines.append(
                f"  decision {d.decision_id} at {rfc3339(d.at)} by {d.actor}: {d.result}; reason "
                f'"{d.reason}"; scope {dict(d.scope)}; new deadline {rfc3339(d.deadline_at)}'
            )
    return "\n".join(lines)
