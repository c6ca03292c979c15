"""The story family: the renewal reminder end to end — an ambiguous timeout, a duplicate
attempt, a retry refused past the 10:00 deadline, the DLQ, an audited extension to 11:00 for
ren_18427 only, one redrive that the receiver answers as already applied, and an ``explain`` that
tells every transition."""

from __future__ import annotations

from conformance.model import Harness, Scenario, Severity, Side, expect, step

__all__ = ["SCENARIOS"]

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        id="story.renewal-reminder",
        title="A renewal reminder from lost responses to one applied redrive",
        guarantee="A reminder whose responses were lost before its deadline is dead-lettered, "
        "redriven once by an audited decision, and applied exactly once by the receiver.",
        severity=Severity.MUST,
        tags=frozenset({Harness.S, Harness.R}),
        steps=(
            step(
                "policy",
                delays_s=(0, 10, 120),
                expected_attempt_time_s=30,
                timeout_s=10,
                start="2026-08-13T09:57:40+00:00",
            ),
            step(
                "publish",
                event="a",
                key="ren_18427",
                type="renewal.reminder",
                deadline="2026-08-13T10:00:00+00:00",
            ),
            step(
                "script",
                event="a",
                answers=({"status": 200, "takes_s": 10}, {"status": 200, "takes_s": 10}),
            ),
            step("attempt", event="a", label="timeout", fault="lost_response"),
            step("attempt", event="a", label="duplicate", fault="lost_response"),
            step("settle", event="a", label="late-retry"),
            step(
                "redrive",
                event="a",
                label="redrive",
                scope="key",
                key="ren_18427",
                actor="ops@marketplace",
                reason="renewal owner extended the window to 11:00",
                deadline="2026-08-13T11:00:00+00:00",
            ),
        ),
        expectations=(
            expect(
                "status", "the first attempt was committed (2xx)", label="timeout", allowed=("2xx",)
            ),
            expect("status", "the duplicate is answered 2xx", label="duplicate", allowed=("2xx",)),
            expect(
                "status",
                "the redrive is answered 2xx (already applied)",
                label="redrive",
                allowed=("2xx",),
            ),
            expect("effects", "the probe shows exactly 1 effect", event="a", equals=1),
            expect(
                "sender_state",
                "the delivery ends delivered",
                side=Side.SENDER,
                event="a",
                state="delivered",
            ),
            expect(
                "dlq_reason_seen",
                "it went through the DLQ as deadline_exhausted",
                side=Side.SENDER,
                event="a",
                reason="deadline_exhausted",
            ),
            expect(
                "attempt_count",
                "three attempts: two before the deadline, one redriven",
                side=Side.SENDER,
                event="a",
                equals=3,
            ),
            expect(
                "decision_by",
                "one queued redrive decision by ops@marketplace",
                side=Side.SENDER,
                event="a",
                actor="ops@marketplace",
            ),
            expect(
                "explains", "explain tells every transition in words", side=Side.SENDER, event="a"
            ),
        ),
    ),
)
