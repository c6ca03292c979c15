"""Judging one expectation and grading it: the guarantee at the scenario's severity, the exact
refusal code as a convention.

:func:`judge` is what a harness calls for each receiver-side expectation. Most expectations go to
their check (:data:`conformance.checks.RECEIVER_CHECKS`) and a failure takes the scenario's
severity, or the expectation's own where it declares one (a ``should`` inside a ``must``
scenario). A status expectation that names one exact refusal code (see
:func:`conformance.answers.refusal_of`) is judged in two parts: the *guarantee* — the delivery is
refused with a 4xx other than 410, never accepted, never a 5xx, never left unanswered — at the
scenario's severity; and the *convention* — the exact code — ``should``, unless the platform
declared the codes its sender relies on (:mod:`conformance.answers`), which makes it as severe as
the scenario. A copy that arrives while another is in flight (the ``in_flight`` class) is judged
the same way, with its own guarantee: answered 2xx, or asked to come back later (409, 423, 425,
429 or 503), never another 5xx, a 410 or nothing; so is an authentic delivery whose unsigned id
header is broken, and a correctly signed body that is not UTF-8 or not JSON: accepted or refused
with a 4xx, never a 5xx, a 410 or nothing.
"""

from __future__ import annotations

from dataclasses import replace

from conformance.answers import IN_FLIGHT, RETRY_LATER, SIGNED_BAD_BODY, UNSIGNED_ID, refusal_of
from conformance.causes import CLAIM
from conformance.checks import (
    RECEIVER_CHECKS,
    Unjudged,
    mark_cause,
    status_matches,
    unverified_duplicate,
)
from conformance.harnesses.exchanges import Exchange
from conformance.harnesses.state import WireRun
from conformance.model import Expectation, Scenario, Severity
from conformance.results import Failure

__all__ = ["CONVENTION", "judge"]

Verdict = Failure | Unjudged | None

CONVENTION = "convention"
"""The cause key of a refusal answered with another code than the one expected."""
_VERIFIED_BEFORE_RECORDING = frozenset({"bad_signature", "missing_header"})
"""The refusal classes whose 2xx to a copy of an event whose earlier copies were refused shows
the id recorded unverified: its signature is broken or missing. (A stale copy answered so may
come from a receiver that never checks timestamps: its scenario's own cause says both.)"""


def _refused(exchange: Exchange) -> bool:
    status = exchange.status
    return status is not None and 400 <= status < 500 and status != 410


def _asked_back(exchange: Exchange) -> bool:
    status = exchange.status
    return status is not None and (200 <= status < 300 or status in RETRY_LATER)


def _answered(exchange: Exchange) -> bool:
    status = exchange.status
    return status is not None and (200 <= status < 300 or _refused(exchange))


_RETRY_LATER_TEXT = ", ".join(str(code) for code in RETRY_LATER)
_GUARANTEES = {
    IN_FLIGHT: (
        _asked_back,
        f"2xx, or asked to come back later ({_RETRY_LATER_TEXT}); never another 5xx, a 410 "
        "or no answer",
    ),
    UNSIGNED_ID: (
        _answered,
        "answered 2xx (the signature holds) or refused with a 4xx (not 410); never a 5xx, "
        "always answered",
    ),
    SIGNED_BAD_BODY: (
        _answered,
        "answered 2xx (correctly signed: only the secret's holder sends it) or refused with a "
        "4xx (not 410); never a 5xx, always answered",
    ),
}
"""The guarantee of a refusal class, where it is not that of bad input (refused with a 4xx)."""
_BAD_INPUT = (
    _refused,
    "refused with a 4xx (not 410); never accepted, never a 5xx, always answered",
)


def _shown(run: WireRun, exchanges: list[Exchange], bad: list[Exchange]) -> str:
    count = f"{len(bad)} of {len(exchanges)} answers: " if len(exchanges) > 1 else ""
    return count + bad[0].describe(run.redactions())


async def _judge_refusal(
    run: WireRun, scenario: Scenario, expectation: Expectation, refusal: str
) -> Verdict:
    exchanges = run.exchanges.get(expectation.args["label"], [])
    if not exchanges:
        return Failure(expectation.describe(), "no request was sent", "", scenario.severity)
    kept, guarantee = _GUARANTEES.get(refusal, _BAD_INPUT)
    wrong = [e for e in exchanges if not kept(e)]
    if wrong:
        shown = _shown(run, exchanges, wrong)
        failure = Failure(guarantee, shown, run.curl(wrong[0].request), scenario.severity)
        if refusal == IN_FLIGHT:  # authentic copies: refused as authentic deliveries are
            status = wrong[0].status
            if status is not None and status >= 500 and status != 503:
                return replace(failure, cause=CLAIM)  # crashed on the first one's claim
            return mark_cause(run, failure, ("2xx",), wrong[0])
        failure = mark_cause(run, failure, (), wrong[0])
        if refusal in _VERIFIED_BEFORE_RECORDING:
            return unverified_duplicate(run, failure, wrong[0])
        return failure
    declared = dict(run.options.answers).get(refusal)
    if declared:  # a copy in flight may always be answered 2xx once the event is committed
        patterns = (*(["2xx"] if refusal == IN_FLIGHT else []), *(str(c) for c in declared))
    else:
        patterns = tuple(str(p) for p in expectation.args["allowed"])
    other = [e for e in exchanges if not any(status_matches(e, p) for p in patterns)]
    if not other:
        return None
    listed = " or ".join(_pattern_text(p) for p in patterns)
    if declared:
        expected = f"{listed} (the platform relies on it: [answers] {refusal})"
        severity = scenario.severity
    else:
        expected = (
            f"{listed} (hookproof's convention; declare [answers] {refusal} to make it a must)"
        )
        severity = Severity.SHOULD
    shown = _shown(run, exchanges, other)
    failure = Failure(expected, shown, run.curl(other[0].request), severity, CONVENTION)
    if refusal == IN_FLIGHT:  # a 429 to a copy in flight asks it back: a convention, not a limit
        return failure
    return mark_cause(run, failure, (), other[0])


def _pattern_text(pattern: str) -> str:
    code, _, requirement = pattern.partition("+")
    return f"{code} with Retry-After" if requirement == "retry-after" else code


async def judge(run: WireRun, scenario: Scenario, expectation: Expectation) -> Verdict:
    """The graded verdict on one receiver-side ``expectation`` of ``scenario``."""
    refusal = refusal_of(scenario, expectation)
    if refusal is not None:
        return await _judge_refusal(run, scenario, expectation, refusal)
    verdict = await RECEIVER_CHECKS[expectation.check](run, expectation)
    if isinstance(verdict, Failure) and verdict.severity is None:
        return replace(verdict, severity=expectation.severity or scenario.severity)
    return verdict
