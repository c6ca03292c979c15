"""The schedules family: a fixed schedule measures each delay from the preceding attempt's
scheduled time (so a late worker does not push the whole schedule back), and full jitter stays
within its bounds."""

from __future__ import annotations

from conformance.model import Harness, Scenario, Severity, Side, expect, step

__all__ = ["SCENARIOS"]

S = frozenset({Harness.S})

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        id="schedules.fixed-from-scheduled",
        title="Fixed schedule measured from the scheduled time",
        guarantee="With the fixed 0, 1 m, 5 m, 15 m, 1 h, 6 h schedule, a retry due at +1 m but "
        "run at +1 m 30 s still schedules the next one at +1 m + 5 m, not from when it ran.",
        severity=Severity.MUST,
        tags=S,
        steps=(
            step("policy", name="schedule"),
            step("publish", event="a"),
            step("script", event="a", answers=({"status": 503},) * 2),
            step("attempt", event="a", label="first"),
            step("advance", seconds=90),
            step("attempt", event="a", label="late"),
        ),
        expectations=(
            expect(
                "attempt_offsets",
                "attempts at +0 s and +90 s",
                side=Side.SENDER,
                event="a",
                offsets_s=(0, 90),
            ),
            expect(
                "next_attempt_at",
                "the third is due at +360 s (60 + 300)",
                side=Side.SENDER,
                event="a",
                offset_s=360,
            ),
        ),
    ),
    Scenario(
        id="schedules.full-jitter-bounds",
        title="Full-jitter delays within bounds",
        guarantee="Each full-jitter delay after attempt n lies in [0, min(cap, base·2^(n-1))].",
        severity=Severity.MUST,
        tags=S,
        steps=(
            step("policy", name="strict", jitter_base_s=5, jitter_cap_s=60, max_attempts=8),
            step("publish", event="a"),
            step("script", event="a", answers=({"status": 503},) * 6),
            step("settle", event="a"),
        ),
        expectations=(
            expect(
                "jitter_bounds",
                "every delay within [0, min(60 s, 5 s·2^(n-1))]",
                side=Side.SENDER,
                event="a",
                base_s=5,
                cap_s=60,
            ),
            expect(
                "sender_state",
                "the delivery ends delivered",
                side=Side.SENDER,
                event="a",
                state="delivered",
            ),
            expect("attempt_count", "seven attempts", side=Side.SENDER, event="a", equals=7),
        ),
    ),
)
