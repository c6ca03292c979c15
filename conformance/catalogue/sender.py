"""The sender family: a real webhook sender, triggered once per scenario, keeps its own promises on
every attempt (valid signature, fresh timestamp, stable event id, byte-identical body) and retries
exactly as the policy it declares says (`hookproof check-sender`, see docs/check-sender.md).

Each scenario's steps are the scripted answers of hookproof's listener, in order (the last one
repeats): ``answer`` a status (optionally with ``Retry-After`` in seconds or as an HTTP date, or
with a ``Location`` on hookproof's own listener), ``hold`` the response past the declared timeout,
``reset`` the connection. Its expectations name the checks of
:data:`conformance.sender_check.judging.X_CHECKS`, judged from the recorded attempt arrivals; an
expectation with a ``severity`` argument grades its own failures (else the scenario's severity
does). Every scenario with more than one attempt also judges its delays.
"""

from __future__ import annotations

from typing import Any

from conformance.model import (
    SCHEMES,
    TIMED,
    Expectation,
    Harness,
    Scenario,
    Severity,
    Side,
    Step,
    expect,
    step,
)

__all__ = ["SCENARIOS"]

X = frozenset({Harness.X})


def _x(check: str, says: str, **args: Any) -> Expectation:
    return expect(check, says, side=Side.SENDER, **args)


POLICY = _x("follows_policy", "retried where the policy retries, stopped where it stops")
DELAYS = _x("delays", "delays within slack of the declared schedule (or its jitter bounds)")


def answer(status: int, **args: Any) -> Step:
    return step("answer", status=status, **args)


def _scenario(
    slug: str,
    title: str,
    guarantee: str,
    steps: tuple[Step, ...],
    *checks: Expectation,
    severity: Severity = Severity.MUST,
    schemes: frozenset[str] | None = None,
) -> Scenario:
    return Scenario(
        id=f"sender.{slug}",
        title=title,
        guarantee=guarantee,
        severity=severity,
        tags=X,
        steps=steps,
        expectations=checks,
        schemes=SCHEMES if schemes is None else schemes,
    )


SCENARIOS: tuple[Scenario, ...] = (
    _scenario(
        "signature-every-attempt",
        "Valid signature on every attempt",
        "Every attempt, the first and each retry, carries a signature that verifies with the "
        "shared secret over the exact bytes sent.",
        (answer(500), answer(503), answer(200)),
        _x("signature", "every attempt's signature verifies"),
        _x(
            "delivery_headers",
            "every attempt declares the platform's content type (and GitHub's X-GitHub-Event)",
            severity=Severity.SHOULD.value,
        ),
        POLICY,
        DELAYS,
    ),
    _scenario(
        "timestamp-fresh",
        "Fresh timestamp on every attempt",
        "Each attempt is signed with the time it is sent: the signed timestamps advance with the "
        "arrivals (within slack) and stay within the maximum skew of arrival.",
        (answer(503), answer(503), answer(503), answer(200)),
        _x("timestamp", "timestamps advance with the arrivals and stay within --max-skew"),
        POLICY,
        DELAYS,
        schemes=TIMED,
    ),
    _scenario(
        "event-id-stable",
        "Same event id on every attempt",
        "Every retry of one delivery carries the event id of the first attempt, so the receiver "
        "can deduplicate it.",
        (answer(500), answer(500), answer(200)),
        _x("event_id", "one event id across all attempts"),
        POLICY,
        DELAYS,
    ),
    _scenario(
        "body-identical",
        "Byte-identical body on every attempt",
        "Every retry sends exactly the bytes of the first attempt (never a re-serialised body).",
        (answer(503), answer(503), answer(200)),
        _x("body", "every body is byte-identical to the first"),
        POLICY,
        DELAYS,
    ),
    _scenario(
        "retry-500",
        "Retry after 500",
        "A 500 answer is retried as the policy says, and a 201 ends the delivery.",
        (answer(500), answer(201)),
        POLICY,
        DELAYS,
    ),
    _scenario(
        "retry-503",
        "Retry after 503",
        "A 503 answer is retried as the policy says, and a 202 ends the delivery.",
        (answer(503), answer(202)),
        POLICY,
        DELAYS,
    ),
    _scenario(
        "retry-timeout",
        "Retry after a timeout, within the declared timeout",
        "An answer held past the declared timeout is given up within that timeout (plus slack, "
        "never an open-ended hang) and retried, on a retry as on the first attempt (a timeout "
        "set on the first request only leaves the retries open-ended).",
        (step("hold"), step("hold"), answer(200)),
        _x("timeout_bounded", "the sender hangs up within its declared timeout plus slack"),
        POLICY,
        DELAYS,
    ),
    _scenario(
        "retry-reset",
        "Retry after a connection reset",
        "A connection reset before any answer is retried (the receiver may or may not have "
        "committed), and a 204 ends the delivery.",
        (step("reset"), answer(204)),
        POLICY,
        DELAYS,
    ),
    _scenario(
        "retry-after-seconds",
        "Retry-After in seconds honoured",
        "After 429 with Retry-After in seconds, no attempt arrives before the announced time.",
        (answer(429, retry_after="seconds"), answer(200)),
        _x("retry_after", "no attempt before the announced Retry-After"),
        POLICY,
        DELAYS,
    ),
    _scenario(
        "retry-after-date",
        "Retry-After as an HTTP date honoured",
        "After 429 with Retry-After as an HTTP date, no attempt arrives before that date.",
        (answer(429, retry_after="date"), answer(200)),
        _x("retry_after", "no attempt before the announced Retry-After date"),
        POLICY,
        DELAYS,
    ),
    _scenario(
        "retry-after-503",
        "Retry-After on a 503 honoured",
        "After 503 with Retry-After in seconds, no attempt arrives before the announced time, "
        "when the declared policy honours Retry-After on the statuses it retries (a policy "
        "file's default). A should: RFC 9110 defines Retry-After for 503, but the webhook specs "
        "ask a sender to honour it on 429 only, and many platforms do no more.",
        (answer(503, retry_after="seconds"), answer(200)),
        _x("retry_after", "no attempt before the announced Retry-After"),
        POLICY,
        DELAYS,
        severity=Severity.SHOULD,
    ),
    _scenario(
        "no-retry-after-2xx",
        "No retry after a 2xx",
        "A 2xx answer ends the delivery: no attempt follows it.",
        (answer(200),),
        POLICY,
    ),
    _scenario(
        "stop-after-410",
        "Stop after 410 Gone",
        "A 410 answer ends the delivery (unless the policy declares otherwise): no retry follows.",
        (answer(410), answer(200)),
        POLICY,
        DELAYS,
    ),
    _scenario(
        "unauthorized",
        "401 per the declared profile",
        "A 401 is retried or stops exactly as the policy's classification says (strict: stop; "
        "schedule: retry).",
        (answer(401), answer(200)),
        POLICY,
        DELAYS,
    ),
    _scenario(
        "forbidden",
        "403 per the declared profile",
        "A 403 is retried or stops exactly as the policy's classification says (strict: stop; "
        "schedule: retry).",
        (answer(403), answer(200)),
        POLICY,
        DELAYS,
    ),
    _scenario(
        "client-error",
        "Other 4xx per the declared profile",
        "A 422 is retried or stops exactly as the policy's classification says (strict: stop; "
        "schedule: retry).",
        (answer(422), answer(200)),
        POLICY,
        DELAYS,
    ),
    _scenario(
        "schedule-delays",
        "Delays follow the declared schedule",
        "The delays between attempt arrivals match the declared schedule within slack (or stay "
        "within the full-jitter bounds), a held answer not pushing later attempts back.",
        (answer(503), answer(503), answer(503), answer(200)),
        DELAYS,
        POLICY,
    ),
    _scenario(
        "max-attempts",
        "Never more than max_attempts",
        "A delivery that is never acknowledged gets at most max_attempts attempts, then stops.",
        (answer(503),),
        _x("max_attempts", "no more than max_attempts attempts"),
        POLICY,
        DELAYS,
    ),
    _scenario(
        "max-attempts-unanswered",
        "Never more than max_attempts when nothing answers",
        "A connection reset and a timeout are attempts too: a delivery whose endpoint never "
        "answers gets at most max_attempts attempts, then stops (a sender whose budget counts "
        "only 5xx answers retries it for ever).",
        (step("reset"), step("hold")),
        _x("max_attempts", "no more than max_attempts attempts"),
        POLICY,
        DELAYS,
    ),
    _scenario(
        "redirect-not-followed",
        "A redirect is not followed",
        "A 307 with a Location is a failed attempt, not a new address: the sender sends nothing to "
        "the Location (Standard Webhooks counts a 3xx as a failure and recommends updating the "
        "URL instead), then retries or stops as its policy classifies 3xx.",
        (answer(307, location="moved"), answer(200)),
        _x(
            "redirect_not_followed",
            "no request to the Location of the 307",
            severity=Severity.SHOULD.value,
        ),
        POLICY,
        DELAYS,
    ),
    _scenario(
        "one-in-flight",
        "One attempt in flight at a time",
        "A retry starts only after the previous attempt ended (answered, timed out or reset): "
        "two attempts of one delivery are never in flight at once.",
        (step("hold"), answer(200)),
        _x("one_in_flight", "no attempt starts before the previous one ended"),
        POLICY,
        severity=Severity.SHOULD,
    ),
)
