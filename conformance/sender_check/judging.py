"""The checks of the ``sender.*`` scenarios: pure functions from the recorded attempts and the
declared policy to what was observed wrong (an empty list is a pass).

Time is judged from the outside, from attempt *arrivals*: a delay matches when it lies within
slack of the declared one, after allowing for the time the previous attempt was held (a sender
schedules from the scheduled time, so a held answer must neither push later attempts back nor be
counted against them); full-jitter gaps stay within their ceiling plus that hold plus slack. A
timestamp is fresh when the difference between two attempts' signed timestamps matches the
difference between their arrivals (within slack and the one-second resolution of the timestamp),
so a skewed sender clock is no failure but a reused timestamp is; and every timestamp is within
the maximum skew of arrival. Under full jitter, where any single wait may be 0 s, waits that are
all below a small fraction of their ceilings on three or more gaps look like no backoff at all
(:data:`NO_BACKOFF_FRACTION`). The event id and the timestamp are read on every attempt where the
scheme carries them, whether its signature verifies or not: a signing bug fails the signature
check only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from conformance.sender_check.declared import Declared
from conformance.sender_check.listener import Attempt
from conformance.sender_check.script import Kind
from receiver.problems import media_type
from sender_sim.classify import Action

__all__ = [
    "NO_BACKOFF_FRACTION",
    "NO_BACKOFF_MIN_GAPS",
    "X_CHECKS",
    "History",
    "Problem",
    "timeline",
]

_RETRY_AFTER_TOLERANCE_S = 0.05
_IN_FLIGHT_TOLERANCE_S = 0.01
_TIMESTAMP_RESOLUTION_S = 1.0
NO_BACKOFF_FRACTION = 0.03
"""Under full jitter, waits all below this fraction of their ceilings look like no backoff: a
correct sender's waits are uniform, so it does that on n gaps with probability 0.03^n (2.7e-5 for
3 gaps; the three scenarios of three gaps together below 1e-4)."""
NO_BACKOFF_MIN_GAPS = 3
"""The fewest gaps the no-backoff check judges."""


@dataclass(frozen=True)
class History:
    """What a scenario recorded, and what it is judged against."""

    attempts: Sequence[Attempt]
    declared: Declared
    uses_timestamp: bool
    followed: Sequence[Attempt] = ()
    """Requests that followed a redirect to its ``Location`` (no attempts)."""
    delivery_headers: Sequence[tuple[str, str]] = ()
    """The platform's delivery headers (``Scheme.delivery_headers``) the attempts should carry."""

    def recorded(self) -> list[Attempt]:
        """Every request, attempts and followed redirects, in order of arrival."""
        return sorted([*self.attempts, *self.followed], key=lambda request: request.arrived)


@dataclass(frozen=True)
class Problem:
    """One thing a check observed wrong, and the requests that show it (attempts, or requests
    that followed a redirect): the lines of the timeline the console shows without
    ``--verbose``."""

    observed: str
    shows: tuple[Attempt, ...] = ()


Check = Callable[[History], list[Problem]]


def _signature(history: History) -> list[Problem]:
    return [
        Problem(f"attempt {a.number}'s signature does not verify: {a.verify_error}", (a,))
        for a in history.attempts
        if a.message is None
    ]


def _timestamp(history: History) -> list[Problem]:
    problems = [
        Problem(f"attempt {a.number} carried no timestamp in integer seconds", (a,))
        for a in history.attempts
        if a.timestamp is None
    ]
    stamped = [(a, a.timestamp) for a in history.attempts if a.timestamp is not None]
    if not stamped:
        return problems
    first, first_ts = stamped[0]
    for a, ts in stamped[1:]:
        signed = ts - first_ts
        arrived = a.arrived - first.arrived
        allowed = history.declared.slack(arrived) + _TIMESTAMP_RESOLUTION_S
        if abs(signed - arrived) > allowed:
            why = (
                "a reused or stale timestamp"
                if signed < arrived
                else "a timestamp running ahead of the clock: milliseconds, not seconds?"
            )
            problems.append(
                Problem(
                    f"attempt {a.number}'s timestamp is {signed:+d} s from attempt "
                    f"{first.number}'s, but it arrived {arrived:.2f} s later ({why})",
                    (first, a),
                )
            )
    skew = history.declared.max_skew_s + _TIMESTAMP_RESOLUTION_S
    for a, ts in stamped:
        off = ts - a.arrived_wall
        if abs(off) > skew:
            problems.append(
                Problem(
                    f"attempt {a.number}'s timestamp is {off:+.1f} s from its arrival "
                    f"(more than --max-skew {history.declared.max_skew_s:g} s)",
                    (a,),
                )
            )
    return problems


def _event_id(history: History) -> list[Problem]:
    problems = [
        Problem(f"attempt {a.number} carried no event id", (a,))
        for a in history.attempts
        if not a.event_id
    ]
    carrying = [a for a in history.attempts if a.event_id]
    problems += [
        Problem(
            f"attempt {a.number} carried event id {a.event_id!r}, attempt {carrying[0].number} "
            f"{carrying[0].event_id!r}",
            (carrying[0], a),
        )
        for a in carrying[1:]
        if a.event_id != carrying[0].event_id
    ]
    return problems


_SENDERS_OWN = frozenset({"user-agent"})
"""Delivery headers a sender may write its own way (it names itself)."""


def _delivery_headers(history: History) -> list[Problem]:
    """Every attempt declares the platform's content type (its media type; parameters such as
    ``charset`` are the sender's) and carries the other headers receivers route on (GitHub's
    ``X-GitHub-Event``: Octokit refuses a delivery without it; express.raw's ``type`` filter
    hands the handler no body when the content type is not JSON)."""
    wrong: dict[tuple[str, str, str | None], list[Attempt]] = {}
    for a in history.attempts:
        for name, value in history.delivery_headers:
            if name in _SENDERS_OWN:
                continue
            got = a.headers.get(name)
            missed = (
                got is None or media_type(got) != media_type(value)
                if name == "content-type"
                else not got
            )
            if missed:
                wrong.setdefault((name, value, got), []).append(a)
    problems = []
    for (name, value, got), attempts in wrong.items():
        which = ", ".join(str(a.number) for a in attempts)
        shown = "none" if got is None else repr(got)
        problems.append(
            Problem(
                f"{'attempt' if len(attempts) == 1 else 'attempts'} {which} carried {name}: "
                f"{shown} (the platform sends {value!r}; receivers built on its libraries rely "
                "on it)",
                tuple(attempts),
            )
        )
    return problems


def _body(history: History) -> list[Problem]:
    first = history.attempts[0]
    problems = []
    for a in history.attempts[1:]:
        if a.body != first.body:
            at = next(
                (i for i, (x, y) in enumerate(zip(a.body, first.body, strict=False)) if x != y),
                min(len(a.body), len(first.body)),
            )
            problems.append(
                Problem(
                    f"attempt {a.number}'s body differs from attempt 1's ({len(a.body)} vs "
                    f"{len(first.body)} bytes, first difference at byte {at})",
                    (first, a),
                )
            )
    return problems


def _follows_policy(history: History) -> list[Problem]:
    attempts, declared = history.attempts, history.declared
    problems = []
    for a in attempts:
        verdict = declared.verdict(a.answer.outcome())
        later = a.number < len(attempts)
        said = a.answer.describe()
        both = (a, *attempts[a.number : a.number + 1])
        if verdict.action is Action.DELIVERED and later:
            problems.append(
                Problem(f"attempt {a.number + 1} arrived after attempt {a.number} got {said}", both)
            )
        elif verdict.action is Action.DEAD_LETTER and later:
            problems.append(
                Problem(
                    f"attempt {a.number + 1} arrived after attempt {a.number} got {said}, "
                    "which the declared policy stops on",
                    both,
                )
            )
        elif verdict.action is Action.RETRY and not later and a.number < declared.max_attempts:
            problems.append(
                Problem(
                    f"no retry after attempt {a.number} got {said}, which the declared policy "
                    f"retries ({a.number} of {declared.max_attempts} attempts made)",
                    (a,),
                )
            )
    return problems


def _max_attempts(history: History) -> list[Problem]:
    limit = history.declared.max_attempts
    made = len(history.attempts)
    if made > limit:
        beyond = tuple(history.attempts[limit - 1 :])
        return [Problem(f"{made} attempts, more than max_attempts {limit}", beyond)]
    return []


def _delays(history: History) -> list[Problem]:
    declared = history.declared
    problems = []
    carry = 0.0
    # Full jitter: each (previous, next, wait after the previous answer, ceiling).
    waits: list[tuple[Attempt, Attempt, float, float]] = []
    for prev, cur in zip(history.attempts, history.attempts[1:], strict=False):
        if (
            prev.retry_after_s is not None
            and declared.verdict(prev.answer.outcome()).honor_retry_after
        ):
            carry = 0.0  # judged by the Retry-After check, not the schedule
            continue
        low, high = declared.delay_bounds(prev.number)
        slack = declared.slack(high)
        gap = cur.arrived - prev.arrived
        lowest, highest = low - slack - carry, high + prev.held_s + slack
        if not lowest <= gap <= highest:
            held = f", the {prev.held_s:.2f} s it was held included" if prev.held_s > 0.05 else ""
            # A fixed schedule's retry is due a delay after the previous attempt's *due* time
            # (seed 002): a short gap is a retry sent early, or a previous attempt sent late.
            late = (
                f": too soon, or attempt {prev.number} left more than {slack:g} s after it was due"
                if declared.fixed and gap < lowest
                else ""
            )
            problems.append(
                Problem(
                    f"attempt {cur.number} arrived {gap:.2f} s after attempt {prev.number}; "
                    f"declared {declared.describe_delay(prev.number)} (allowed "
                    f"{max(0.0, lowest):.2f}–{highest:.2f} s{held}){late}",
                    (prev, cur),
                )
            )
        carry = min(max(0.0, gap - high), prev.held_s) if declared.fixed else 0.0
        if not declared.fixed and prev.answer.kind is not Kind.HOLD and prev.ended is not None:
            waits.append((prev, cur, cur.arrived - prev.ended, high))
    return problems + _no_backoff(waits)


def _no_backoff(waits: Sequence[tuple[Attempt, Attempt, float, float]]) -> list[Problem]:
    """Full jitter allows any wait in ``[0, ceiling]``, so one short wait proves nothing; but a
    correct sender waits below ``NO_BACKOFF_FRACTION`` of *every* ceiling of
    ``NO_BACKOFF_MIN_GAPS`` or more gaps with probability at most ``NO_BACKOFF_FRACTION ** 3``.
    The wait is counted from when the previous answer was sent (a held attempt is left out: a
    sender may schedule from its start, so its wait is no evidence)."""
    if len(waits) < NO_BACKOFF_MIN_GAPS:
        return []
    if any(wait >= NO_BACKOFF_FRACTION * ceiling for _, _, wait, ceiling in waits):
        return []
    shown = ", ".join(f"{wait:.3f}" for _, _, wait, _ in waits)
    ceilings = ", ".join(f"{ceiling:g}" for _, _, _, ceiling in waits)
    chance = NO_BACKOFF_FRACTION ** len(waits)
    shows: list[Attempt] = []
    for prev, cur, _, _ in waits:
        shows += [a for a in (prev, cur) if not any(a is seen for seen in shows)]
    return [
        Problem(
            f"the gaps look like no backoff at all: after attempts "
            f"{', '.join(str(prev.number) for prev, _, _, _ in waits)} the sender waited "
            f"{shown} s, each below {NO_BACKOFF_FRACTION:.0%} of its full-jitter ceiling "
            f"({ceilings} s); a correct full-jitter sender does that with probability "
            f"{chance:.1e}",
            tuple(shows),
        )
    ]


def _retry_after(history: History) -> list[Problem]:
    problems = []
    for prev, cur in zip(history.attempts, history.attempts[1:], strict=False):
        if prev.retry_after_s is None or prev.ended is None:
            continue
        waited = cur.arrived - prev.ended
        if waited < prev.retry_after_s - _RETRY_AFTER_TOLERANCE_S:
            problems.append(
                Problem(
                    f"attempt {cur.number} arrived {waited:.2f} s after the "
                    f"{prev.answer.status}, before its Retry-After of {prev.retry_after_s:.2f} s",
                    (prev, cur),
                )
            )
    return problems


def _timeout_bounded(history: History) -> list[Problem]:
    declared = history.declared
    bound = declared.timeout_s + declared.slack(declared.timeout_s)
    problems = []
    for a in history.attempts:
        if a.answer.kind is not Kind.HOLD:
            continue
        if not a.hung_up:
            problems.append(
                Problem(
                    f"the sender was still waiting on attempt {a.number} after {a.held_s:.2f} s "
                    f"(declared timeout {declared.timeout_s:g} s), so hookproof answered 503",
                    (a,),
                )
            )
        elif a.held_s > bound:
            problems.append(
                Problem(
                    f"the sender waited {a.held_s:.2f} s on attempt {a.number}, more than its "
                    f"declared timeout {declared.timeout_s:g} s plus slack",
                    (a,),
                )
            )
    return problems


def _one_in_flight(history: History) -> list[Problem]:
    """An attempt that came while an earlier held one was still open (its connection neither
    answered nor closed: seen, not timed), or before the previous one ended by more than the
    timing tolerance."""
    problems: list[Problem] = []
    for index, cur in enumerate(history.attempts):
        prev = history.attempts[index - 1] if index else None
        if cur.open_held:
            problems.extend(
                Problem(
                    f"attempt {cur.number} arrived while attempt {number} was still in flight: "
                    "its connection was open, unanswered, and the sender had not closed it",
                    (history.attempts[number - 1], cur),
                )
                for number in cur.open_held
            )
        elif (
            prev is not None
            and prev.ended is not None
            and cur.arrived < prev.ended - _IN_FLIGHT_TOLERANCE_S
        ):
            problems.append(
                Problem(
                    f"attempt {cur.number} arrived while attempt {prev.number} was still in flight",
                    (prev, cur),
                )
            )
    return problems


def _redirect_not_followed(history: History) -> list[Problem]:
    problems = []
    for request in history.followed:
        source = history.attempts[request.number - 1]
        problems.append(
            Problem(
                f"the sender followed attempt {source.number}'s {source.answer.status} to its "
                f"Location: a request arrived at {request.followed} "
                f"{request.arrived - source.arrived:.2f} s after the attempt",
                (source, request),
            )
        )
    return problems


X_CHECKS: Mapping[str, Check] = {
    "signature": _signature,
    "timestamp": _timestamp,
    "event_id": _event_id,
    "body": _body,
    "delivery_headers": _delivery_headers,
    "follows_policy": _follows_policy,
    "max_attempts": _max_attempts,
    "delays": _delays,
    "retry_after": _retry_after,
    "timeout_bounded": _timeout_bounded,
    "one_in_flight": _one_in_flight,
    "redirect_not_followed": _redirect_not_followed,
}
"""Every check a ``sender.*`` expectation may name."""


def timeline(requests: Sequence[Attempt]) -> str:
    """The recorded requests (:meth:`History.recorded`), one line each: the reproduction of a
    failure."""
    if not requests:
        return "no attempt arrived"
    start = requests[0].arrived
    lines = []
    for a in requests:
        signed = "signature valid" if a.message else f"signature invalid ({a.verify_error})"
        signed += f", event {a.event_id}" if a.event_id else ", no event id"
        signed += "" if a.timestamp is None else f", timestamp {a.timestamp}"
        digest = hashlib.sha256(a.body).hexdigest()[:12]
        if a.answer.kind is Kind.HOLD:
            end = (
                f"held; the sender hung up after {a.held_s:.2f} s"
                if a.hung_up
                else f"held {a.held_s:.2f} s, then answered 503"
            )
        else:
            end = f"answered {a.answer.describe()}"
            if a.retry_after_s is not None:
                end += f" ({a.retry_after_s:.2f} s)"
        what = f"redirect of attempt {a.number} followed to {a.followed}" if a.followed else ""
        lines.append(
            f"{what or f'attempt {a.number}'} at +{a.arrived - start:.3f} s: {signed}, body "
            f"{len(a.body)} bytes sha256:{digest}; {end}"
        )
    return "\n".join(lines)
