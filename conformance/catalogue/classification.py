"""The classification family: each answer or transport failure is classified by the profile —
retried, or dead-lettered with the right reason — never lumped into one catch block."""

from __future__ import annotations

from typing import Any

from conformance.model import Harness, Scenario, Severity, Side, expect, step

__all__ = ["SCENARIOS"]

S = frozenset({Harness.S})


def _one(
    name: str,
    title: str,
    guarantee: str,
    answer: dict[str, Any],
    profile: str,
    state: str,
    reason: str | None = None,
    extra: tuple[Any, ...] = (),
) -> Scenario:
    words = f"the delivery is {state}" + (f" ({reason})" if reason else "")
    return Scenario(
        id=f"classification.{name}",
        title=title,
        guarantee=guarantee,
        severity=Severity.MUST,
        tags=S,
        steps=(
            step("policy", name=profile),
            step("publish", event="a", deadline_s=3600),
            step("script", event="a", answers=(answer,)),
            step("attempt", event="a", label="first"),
        ),
        expectations=(
            expect(
                "sender_state",
                words,
                side=Side.SENDER,
                event="a",
                state=state,
                **({"reason": reason} if reason else {}),
            ),
            *extra,
        ),
    )


SCENARIOS: tuple[Scenario, ...] = (
    _one(
        "gone",
        "410 Gone",
        "A 410 means never send this again: dead-lettered as permanent_response, not retried.",
        {"status": 410},
        "schedule",
        "dead_letter",
        "permanent_response",
    ),
    _one(
        "unauthorized",
        "401 under the strict profile",
        "A 401 is quarantined as "
        "authentication_policy: retries cannot repair a rotated credential.",
        {"status": 401},
        "strict",
        "dead_letter",
        "authentication_policy",
    ),
    _one(
        "forbidden",
        "403 under the strict profile",
        "A 403 is quarantined as authentication_policy.",
        {"status": 403},
        "strict",
        "dead_letter",
        "authentication_policy",
    ),
    _one(
        "client-error-strict",
        "Other 4xx under the strict profile",
        "Another 4xx needs correction, not traffic: dead-lettered as permanent_response.",
        {"status": 400},
        "strict",
        "dead_letter",
        "permanent_response",
    ),
    _one(
        "client-error-schedule",
        "Other 4xx under the schedule profile",
        "Under the schedule profile every non-2xx answer but 410 is retried on the schedule.",
        {"status": 400},
        "schedule",
        "scheduled",
    ),
    _one(
        "conflict-strict",
        "409 under the strict profile",
        "A 409 is quarantined "
        "(permanent_response): a generic sender must not invent success semantics for it.",
        {"status": 409},
        "strict",
        "dead_letter",
        "permanent_response",
    ),
    _one(
        "conflict-schedule",
        "409 under the schedule profile",
        "Under the schedule profile a 409 is retried.",
        {"status": 409},
        "schedule",
        "scheduled",
    ),
    _one(
        "retry-after-inside",
        "429 with Retry-After inside the deadline",
        "A 429 is retried, no sooner than its Retry-After when that fits the deadline.",
        {"status": 429, "retry_after": "120"},
        "strict",
        "scheduled",
        extra=(
            expect(
                "retry_not_before",
                "the retry waits at least 120 s",
                side=Side.SENDER,
                event="a",
                seconds=120,
            ),
        ),
    ),
    _one(
        "retry-after-beyond",
        "429 with Retry-After beyond the deadline",
        "A 429 whose "
        "Retry-After lands past the deadline dead-letters as deadline_exhausted instead of "
        "retrying too early or too late.",
        {"status": 429, "retry_after": "7200"},
        "strict",
        "dead_letter",
        "deadline_exhausted",
    ),
    Scenario(
        id="classification.ambiguous-transport",
        title="Timeout, DNS, TLS and connection failures",
        guarantee="Timeouts, DNS, TLS and connection errors are ambiguous (the receiver may have "
        "committed) and retried until delivered.",
        severity=Severity.MUST,
        tags=S,
        steps=(
            step("policy", name="strict"),
            step("publish", event="a", deadline_s=86_400),
            step(
                "script",
                event="a",
                answers=(
                    {"error": "timeout"},
                    {"error": "dns"},
                    {"error": "tls"},
                    {"error": "connect"},
                ),
            ),
            step("settle", event="a"),
        ),
        expectations=(
            expect(
                "sender_state",
                "the delivery ends delivered",
                side=Side.SENDER,
                event="a",
                state="delivered",
            ),
            expect(
                "attempt_count",
                "five attempts (four failures, then 2xx)",
                side=Side.SENDER,
                event="a",
                equals=5,
            ),
            expect(
                "same_event_on_wire",
                "every attempt carried the same id and bytes",
                side=Side.SENDER,
                event="a",
            ),
        ),
    ),
    Scenario(
        id="classification.invalid-envelope",
        title="Invalid envelope",
        guarantee="An envelope that fails validation dead-letters as invalid_envelope before any "
        "send.",
        severity=Severity.MUST,
        tags=S,
        steps=(step("publish", event="a", body="invalid"),),
        expectations=(
            expect(
                "sender_state",
                "the delivery is a dead letter (invalid_envelope)",
                side=Side.SENDER,
                event="a",
                state="dead_letter",
                reason="invalid_envelope",
            ),
            expect(
                "wire_count", "nothing reaches the receiver", side=Side.SENDER, event="a", equals=0
            ),
        ),
    ),
)
