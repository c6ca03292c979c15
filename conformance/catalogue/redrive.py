"""The redrive family: redrive is an audited operator decision — actor, reason, scope and a fresh
deadline required — applied by compare-and-set, atomically in bulk, with one explicit attempt,
and only for a payload whose digest still matches."""

from __future__ import annotations

from conformance.model import Expectation, Harness, Scenario, Severity, Side, Step, expect, step

__all__ = ["SCENARIOS"]

S = frozenset({Harness.S})
GONE = {"status": 410}


def _dead(event: str) -> tuple[Step, ...]:
    return (
        step("publish", event=event),
        step("script", event=event, answers=(GONE,)),
        step("attempt", event=event, label=f"{event}-first"),
    )


def _still_dead(event: str) -> Expectation:
    return expect(
        "sender_state",
        f"'{event}' stays a dead letter",
        side=Side.SENDER,
        event=event,
        state="dead_letter",
    )


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        id="redrive.missing-fields",
        title="Redrive without actor, reason or deadline",
        guarantee="A redrive missing its actor, its reason or its fresh deadline is refused and "
        "queues nothing.",
        severity=Severity.MUST,
        tags=S,
        steps=(
            *_dead("a"),
            step("redrive", event="a", label="no-actor", omit=("actor",)),
            step("redrive", event="a", label="no-reason", omit=("reason",)),
            step("redrive", event="a", label="no-deadline", omit=("deadline",)),
        ),
        expectations=(
            expect(
                "redrive_refused",
                "all three are refused as incomplete",
                side=Side.SENDER,
                event="a",
                kind="incomplete",
                count=3,
            ),
            _still_dead("a"),
            expect("wire_count", "no further request", side=Side.SENDER, event="a", equals=1),
        ),
    ),
    Scenario(
        id="redrive.compare-and-set",
        title="Redrive is compare-and-set",
        guarantee="A second redrive of a delivery that is no longer a dead letter is refused "
        "(not_dead_letter): two operators cannot both enqueue it.",
        severity=Severity.MUST,
        tags=S,
        steps=(
            *_dead("a"),
            step("redrive", event="a", label="first", then_attempt=False),
            step("redrive", event="a", label="second", then_attempt=False),
            step("settle", event="a"),
        ),
        expectations=(
            expect(
                "redrive_refused",
                "the second is refused (not_dead_letter)",
                side=Side.SENDER,
                event="a",
                code="not_dead_letter",
                count=1,
            ),
            expect(
                "sender_state",
                "the delivery ends delivered",
                side=Side.SENDER,
                event="a",
                state="delivered",
            ),
            expect("wire_count", "one redriven request", side=Side.SENDER, event="a", equals=2),
        ),
    ),
    Scenario(
        id="redrive.atomic-bulk",
        title="Bulk redrive is atomic",
        guarantee="A bulk redrive with one ineligible item queues nothing at all.",
        severity=Severity.MUST,
        tags=S,
        steps=(
            *_dead("a"),
            *_dead("b"),
            step("publish", event="c"),
            step("attempt", event="c", label="c-first"),
            step("redrive", event="a", label="bulk", scope="events", events=("a", "b", "c")),
        ),
        expectations=(
            expect(
                "redrive_refused",
                "the bulk redrive is refused (c is not a dead letter)",
                side=Side.SENDER,
                event="a",
                code="not_dead_letter",
                count=1,
            ),
            _still_dead("a"),
            _still_dead("b"),
            expect(
                "wire_count", "no further request for 'a'", side=Side.SENDER, event="a", equals=1
            ),
        ),
    ),
    Scenario(
        id="redrive.explicit-attempt",
        title="One explicit attempt past the limit",
        guarantee="A redrive of an attempts-exhausted delivery grants exactly one explicit "
        "attempt past max_attempts; its failure returns it to the DLQ with no new budget.",
        severity=Severity.MUST,
        tags=S,
        steps=(
            step("policy", delays_s=(0, 60), max_attempts=2),
            step("publish", event="a"),
            step("script", event="a", answers=({"status": 503},) * 4),
            step("settle", event="a"),
            step("redrive", event="a", label="redrive"),
            step("settle", event="a"),
        ),
        expectations=(
            expect(
                "attempt_count",
                "three attempts: two automatic, one explicit",
                side=Side.SENDER,
                event="a",
                equals=3,
            ),
            _still_dead("a"),
            expect(
                "dlq_reason_seen",
                "it first dead-lettered as attempts_exhausted",
                side=Side.SENDER,
                event="a",
                reason="attempts_exhausted",
            ),
        ),
    ),
    Scenario(
        id="redrive.digest-changed",
        title="Redrive refused when the payload changed",
        guarantee="A redrive revalidates the payload digest: a stored payload that no longer "
        "matches is refused (digest_changed), never sent.",
        severity=Severity.MUST,
        tags=S,
        steps=(
            *_dead("a"),
            step("corrupt_payload", event="a"),
            step("redrive", event="a", label="redrive"),
        ),
        expectations=(
            expect(
                "redrive_refused",
                "refused as digest_changed",
                side=Side.SENDER,
                event="a",
                code="digest_changed",
                count=1,
            ),
            _still_dead("a"),
            expect("wire_count", "no further request", side=Side.SENDER, event="a", equals=1),
        ),
    ),
)
