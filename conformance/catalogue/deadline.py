"""The deadline family: a new automatic attempt starts only if it can finish before the business
deadline (``start + expected_attempt_time + max_clock_skew < deadline``, strictly), checked at
microsecond precision on the virtual clock."""

from __future__ import annotations

from conformance.model import Expectation, Harness, Scenario, Severity, Side, Step, expect, step

__all__ = ["SCENARIOS"]

S = frozenset({Harness.S})
POLICY = step("policy", delays_s=(0, 60), expected_attempt_time_s=30)


def _dead(reason: str) -> tuple[Expectation, ...]:
    return (
        expect(
            "sender_state",
            f"the delivery is a dead letter ({reason})",
            side=Side.SENDER,
            event="a",
            state="dead_letter",
            reason=reason,
        ),
    )


def _boundary(name: str, title: str, offset_us: int, retried: bool) -> Scenario:
    where = {1: "1 µs before", 0: "exactly at", -1: "1 µs after"}[offset_us]
    if retried:
        guarantee = (
            f"A retry whose attempt would end {where} the deadline is scheduled (the rule "
            "is strict), and delivered on time."
        )
        tail: tuple[Step, ...] = (step("settle", event="a"),)
        expectations: tuple[Expectation, ...] = (
            expect(
                "sender_state",
                "the delivery ends delivered",
                side=Side.SENDER,
                event="a",
                state="delivered",
            ),
            expect(
                "attempt_offsets",
                "attempts at +0 s and +60 s",
                side=Side.SENDER,
                event="a",
                offsets_s=(0, 60),
            ),
        )
    else:
        guarantee = (
            f"A retry whose attempt would end {where} the deadline is not scheduled: the "
            "delivery dead-letters with deadline_exhausted at once."
        )
        tail = ()
        expectations = (
            *_dead("deadline_exhausted"),
            expect("attempt_count", "exactly one attempt", side=Side.SENDER, event="a", equals=1),
        )
    return Scenario(
        id=f"deadline.{name}",
        title=title,
        guarantee=guarantee,
        severity=Severity.MUST,
        tags=S,
        steps=(
            POLICY,
            step("publish", event="a", deadline_s=90, deadline_us=offset_us),
            step("script", event="a", answers=({"status": 503},)),
            step("attempt", event="a", label="first"),
            *tail,
        ),
        expectations=expectations,
    )


SCENARIOS: tuple[Scenario, ...] = (
    _boundary("retry-before", "Next attempt ends 1 µs before the deadline", 1, True),
    _boundary("retry-at", "Next attempt ends exactly at the deadline", 0, False),
    _boundary("retry-after", "Next attempt ends 1 µs after the deadline", -1, False),
    Scenario(
        id="deadline.first-too-late",
        title="First attempt already too late",
        guarantee="An event published too close to its deadline for even one attempt is "
        "dead-lettered at once and never sent.",
        severity=Severity.MUST,
        tags=S,
        steps=(POLICY, step("publish", event="a", deadline_s=20)),
        expectations=(
            *_dead("deadline_exhausted"),
            expect(
                "wire_count", "nothing reaches the receiver", side=Side.SENDER, event="a", equals=0
            ),
        ),
    ),
    Scenario(
        id="deadline.worker-clock-skew",
        title="A worker whose clock runs slow",
        guarantee="The max_clock_skew margin keeps a worker whose clock runs 10 s slow from "
        "starting an attempt that cannot finish before the true deadline.",
        severity=Severity.MUST,
        tags=S,
        steps=(
            step("policy", delays_s=(0, 60), expected_attempt_time_s=30, max_clock_skew_s=10),
            step("publish", event="a", deadline_s=45),
            step("advance", seconds=20),
            step("attempt", event="a", label="late", worker="slow-worker", worker_skew_s=-10),
        ),
        expectations=(
            *_dead("deadline_exhausted"),
            expect(
                "wire_count", "nothing reaches the receiver", side=Side.SENDER, event="a", equals=0
            ),
        ),
    ),
)
