"""The idempotency family: however often, however concurrently and however late one event is
delivered, the receiver applies it once and answers every copy with its stored result.

Steps are the sender's (publish, attempt, lease expiry, redrive): under R and C each becomes the
signed request the receiver would see; under S the sender simulator performs them against a
scripted receiver, and the sender-side expectations say what it must have put on the wire.
"""

from __future__ import annotations

from conformance.model import (
    CASE_SENSITIVE_IDS,
    Expectation,
    Harness,
    Scenario,
    Severity,
    Side,
    expect,
    step,
)

__all__ = ["SCENARIOS"]

SRC = frozenset({Harness.S, Harness.R, Harness.C})
ONCE = expect("effects", "the probe shows exactly 1 effect", event="a", equals=1)


def _asked_back(label: str, says: str) -> Expectation:
    """Copies sent while another may be in flight: 2xx, or asked back later (the code a
    convention: :data:`conformance.answers.IN_FLIGHT`)."""
    return expect("status", says, label=label, allowed=("2xx", "503"), refusal="in_flight")


IN_FLIGHT_COPIES = _asked_back("copies", "every copy is 2xx or 503")
SAME_BYTES = expect(
    "same_event_on_wire",
    "every request for the event carried the same event id and body bytes",
    side=Side.SENDER,
    event="a",
)
FRESH = expect(
    "fresh_signatures",
    "every request for the event was signed afresh (new timestamp or signature)",
    side=Side.SENDER,
    event="a",
)

OTHER_EVENTS = 100
"""How many other events come between an event and its duplicate in
``idempotency.duplicate-after-other-events`` (more than a "last id" check or a small LRU cache
remembers)."""

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        id="idempotency.sequential-duplicate",
        title="Sequential duplicate with a fresh signature",
        guarantee="A second delivery of a committed event, freshly signed, is answered 2xx with "
        "the stored result and applied no second time.",
        severity=Severity.MUST,
        tags=SRC,
        steps=(
            step("publish", event="a"),
            step("attempt", event="a", label="first", fault="lost_response"),
            step("advance", seconds=60),
            step("attempt", event="a", label="duplicate"),
        ),
        expectations=(
            expect("status", "both answers are 2xx", label="first", allowed=("2xx",)),
            expect(
                "status",
                "the duplicate is 2xx (a committed event: not 409, not 503)",
                label="duplicate",
                allowed=("2xx",),
            ),
            ONCE,
            SAME_BYTES,
            FRESH,
            expect(
                "sender_state",
                "the sender ends delivered",
                side=Side.SENDER,
                event="a",
                state="delivered",
            ),
        ),
    ),
    Scenario(
        id="idempotency.crash-after-send",
        title="Crash after send: lease expires, a second worker resends",
        guarantee="When the sender's worker dies after sending (no ack), the copy a second "
        "worker sends after the lease expires is answered 2xx and applied no second time.",
        severity=Severity.MUST,
        tags=SRC,
        steps=(
            step("publish", event="a"),
            step("attempt", event="a", label="first", fault="crash_after_send"),
            step("expire_lease", event="a"),
            step("attempt", event="a", label="resend", worker="worker-2"),
        ),
        expectations=(
            expect("status", "the first copy is 2xx", label="first", allowed=("2xx",)),
            expect("status", "the resent copy is 2xx", label="resend", allowed=("2xx",)),
            ONCE,
            SAME_BYTES,
            expect(
                "sender_state",
                "the sender ends delivered",
                side=Side.SENDER,
                event="a",
                state="delivered",
            ),
            expect(
                "crash_recorded",
                "the crashed worker's attempt is kept, not acknowledged",
                side=Side.SENDER,
                event="a",
            ),
        ),
    ),
    Scenario(
        id="idempotency.concurrent-duplicates",
        title="Concurrent duplicates",
        guarantee="N copies of one event arriving at once are each answered 2xx or asked to "
        "come back later (hookproof's convention: 503), and applied exactly once.",
        severity=Severity.MUST,
        tags=SRC,
        steps=(
            step("publish", event="a"),
            step("attempt_concurrently", event="a", label="copies"),
        ),
        expectations=(
            IN_FLIGHT_COPIES,
            expect("status_some", "at least one copy is 2xx", label="copies", allowed=("2xx",)),
            ONCE,
            SAME_BYTES,
            expect(
                "sender_state",
                "the sender ends delivered",
                side=Side.SENDER,
                event="a",
                state="delivered",
            ),
        ),
    ),
    Scenario(
        id="idempotency.in-flight-duplicate",
        title="Duplicate while the first copy is in flight",
        guarantee="A copy that arrives while another is being processed is answered 2xx or asked "
        "to come back later (hookproof's convention: 503 with Retry-After; never another 5xx), "
        "and the event is not stuck afterwards.",
        severity=Severity.MUST,
        tags=frozenset({Harness.R, Harness.C}),
        steps=(
            step("deliver_concurrently", event="a", label="copies", copies=2),
            step("deliver", event="a", label="after"),
        ),
        expectations=(
            expect(
                "status",
                "every copy is 2xx or 503 with Retry-After",
                label="copies",
                allowed=("2xx", "503+retry-after"),
                refusal="in_flight",
            ),
            expect("status", "a later copy is 2xx", label="after", allowed=("2xx",)),
            ONCE,
        ),
    ),
    Scenario(
        id="idempotency.sender-hung-up",
        title="The sender hangs up before the answer, then retries",
        guarantee="When the sender closes the connection the moment its request is sent (its "
        "timeout passed, or it crashed: the acknowledgement is lost), the event is still "
        "applied exactly once: the retries that follow are answered 2xx or asked to come back "
        "later (never another 5xx), one of them within --timeout is 2xx, and the probe shows "
        "one effect. A handler tied to the connection (a cancelled request context, a 'close' "
        "listener) that stops after recording the event id loses it.",
        severity=Severity.MUST,
        tags=frozenset({Harness.R, Harness.C}),
        steps=(
            step("deliver_hang_up", event="a", label="hung-up"),
            step("deliver_until_answered", event="a", label="retries"),
        ),
        expectations=(
            _asked_back("retries", "every retry is 2xx or 503"),
            expect(
                "status_some", "a retry within --timeout is 2xx", label="retries", allowed=("2xx",)
            ),
            ONCE,
        ),
    ),
    Scenario(
        id="idempotency.redrive-duplicate",
        title="Duplicate after a redrive hours later",
        guarantee="A redrive of an event the receiver already applied, hours later and freshly "
        "signed, is answered 2xx (already applied) and applied no second time.",
        severity=Severity.MUST,
        tags=SRC,
        steps=(
            step("publish", event="a", early=True),
            step("attempt", event="a", label="first", fault="lost_response", early=True),
            step("dead_letter", event="a"),
            step("advance", seconds=6 * 3600),
            step("redrive", event="a", label="redrive"),
        ),
        expectations=(
            expect("status", "the redriven copy is 2xx", label="redrive", allowed=("2xx",)),
            ONCE,
            SAME_BYTES,
            FRESH,
            expect(
                "sender_state",
                "the sender ends delivered",
                side=Side.SENDER,
                event="a",
                state="delivered",
            ),
        ),
    ),
    Scenario(
        id="idempotency.double-redrive",
        title="Double redrive",
        guarantee="Two operators redriving the same dead letter at once enqueue it once; "
        "any copies that still arrive are applied once.",
        severity=Severity.MUST,
        tags=SRC,
        steps=(
            step("publish", event="a", early=True),
            step("attempt", event="a", label="first", fault="lost_response", early=True),
            step("dead_letter", event="a"),
            step("redrive", event="a", label="redrive", operators=2),
        ),
        expectations=(
            expect(
                "status",
                "every redriven copy is 2xx or 503",
                label="redrive",
                allowed=("2xx", "503"),
            ),
            expect(
                "status_some",
                "at least one redriven copy is 2xx",
                label="redrive",
                allowed=("2xx",),
            ),
            ONCE,
            expect(
                "redrive_once",
                "exactly one of the two redrives is accepted",
                side=Side.SENDER,
                event="a",
            ),
        ),
    ),
    Scenario(
        id="idempotency.distinct-same-body",
        title="Two distinct events with identical bodies",
        guarantee="Deduplication is by event id, not by body: two events with identical payloads "
        "are both applied.",
        severity=Severity.MUST,
        tags=SRC,
        steps=(
            step("publish", event="a"),
            step("publish", event="b", same_body_as="a"),
            step("attempt", event="a", label="first"),
            step("attempt", event="b", label="second"),
        ),
        expectations=(
            expect("status", "the first event is 2xx", label="first", allowed=("2xx",)),
            expect("status", "the second event is 2xx", label="second", allowed=("2xx",)),
            ONCE,
            expect(
                "effects", "the probe shows 1 effect for the second event too", event="b", equals=1
            ),
            expect(
                "sender_state",
                "both events end delivered",
                side=Side.SENDER,
                event="b",
                state="delivered",
            ),
        ),
    ),
    Scenario(
        id="idempotency.case-distinct-ids",
        title="Two event ids that differ only in letter case",
        guarantee="Event ids are compared exactly: two events whose ids differ only in case are "
        "both applied, each counted on its own (a case-insensitive key, such as MySQL's default "
        "collation, drops the second as a duplicate).",
        severity=Severity.MUST,
        tags=frozenset({Harness.R, Harness.C}),
        steps=(
            step("deliver", event="a", label="first"),
            step("deliver", event="b", label="second", id_case_of="a"),
        ),
        expectations=(
            expect("status", "the first event is 2xx", label="first", allowed=("2xx",)),
            expect("status", "the second event is 2xx", label="second", allowed=("2xx",)),
            expect("effects", "the probe shows 1 effect for the first", event="a", equals=1),
            expect("effects", "the probe shows 1 effect for the second", event="b", equals=1),
            # At most: a probe that does not count deliveries (0) hides nothing; one that counts
            # the other event's copy under this id shows the two ids share a record.
            expect(
                "deliveries", "the first counts no delivery of the second", event="a", at_most=1
            ),
            expect(
                "deliveries", "the second counts no delivery of the first", event="b", at_most=1
            ),
        ),
        schemes=CASE_SENSITIVE_IDS,
    ),
    Scenario(
        id="idempotency.staggered-duplicates",
        title="Copies staggered through the first copy's handling",
        guarantee="Copies arriving at different moments while the first is being handled are "
        "answered 2xx or asked to come back later (hookproof's convention: 503), the event is "
        "applied once, and a "
        "2xx to a copy in flight means the event is already committed (the probe says so then).",
        severity=Severity.MUST,
        tags=frozenset({Harness.R, Harness.C}),
        steps=(step("deliver_staggered", event="a", label="copies", after="after"),),
        expectations=(
            IN_FLIGHT_COPIES,
            expect(
                "status", "a copy after the first answered is 2xx", label="after", allowed=("2xx",)
            ),
            ONCE,
            expect(
                "committed_when_acknowledged",
                "a 2xx to a copy in flight is matched by committed on the probe at that moment",
                label="copies",
            ),
        ),
    ),
    Scenario(
        id="idempotency.late-duplicate",
        title="Duplicate after the run so far, and at least --patience",
        guarantee="A freshly signed duplicate of an event whose first copy was sent before the "
        "first scenario (so every scenario run before this one passes between them), and at "
        "least --patience of real time earlier, is answered 2xx and applied no second time (a "
        "dedupe record must outlive the sender's retries; the report gives the real gap).",
        severity=Severity.MUST,
        tags=frozenset({Harness.R, Harness.C}),
        steps=(
            step("deliver", event="a", label="first", early=True),
            step("wait"),
            step("deliver", event="a", label="duplicate"),
        ),
        expectations=(
            expect("status", "the first copy is 2xx", label="first", allowed=("2xx",)),
            expect("status", "the late duplicate is 2xx", label="duplicate", allowed=("2xx",)),
            ONCE,
        ),
    ),
    Scenario(
        id="idempotency.duplicate-after-other-events",
        title=f"Duplicate after {OTHER_EVENTS} other events",
        guarantee=f"A freshly signed duplicate sent after {OTHER_EVENTS} other events were "
        "delivered is answered 2xx and applied no second time (a dedupe that remembers only the "
        "latest ids, a last-event check or an LRU cache, has forgotten it by then); every one of "
        "the other events, genuine and new, is answered 2xx too.",
        severity=Severity.MUST,
        tags=frozenset({Harness.R, Harness.C}),
        steps=(
            step("deliver", event="a", label="first"),
            step("deliver_others", label="others", count=OTHER_EVENTS),
            step("deliver", event="a", label="duplicate"),
        ),
        expectations=(
            expect("status", "the first copy is 2xx", label="first", allowed=("2xx",)),
            # genuine deliveries too: a store that fails under their load ("database is
            # locked", a pool exhausted) answers some of them 5xx
            expect("status", "every other event is 2xx", label="others", allowed=("2xx",)),
            expect(
                "status",
                "the duplicate after the other events is 2xx",
                label="duplicate",
                allowed=("2xx",),
            ),
            ONCE,
        ),
    ),
)
