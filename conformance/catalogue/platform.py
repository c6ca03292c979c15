"""The platform family: what a sender with several endpoints owes its receivers — nothing
automatic to a disabled endpoint, one delivery per active subscribed endpoint and never one to
an endpoint configured later, event-only statuses with no attempt made up, resend of a delivered
event as a new real attempt, an export that refuses to be partial, and a dispatch that throws
costing only its own claim."""

from __future__ import annotations

from conformance.model import Harness, Scenario, Severity, Side, expect, step

__all__ = ["SCENARIOS"]

S = frozenset({Harness.S})
TARGET = "target"
DELIVERED = expect(
    "sender_state", "the delivery ends delivered", side=Side.SENDER, event="a", state="delivered"
)

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        id="platform.disabled-endpoint-holds",
        title="A disabled endpoint receives nothing automatic",
        guarantee="While its endpoint is disabled a due delivery is held, not sent, and the ledger "
        "says so; once the endpoint is enabled again the delivery is sent.",
        severity=Severity.MUST,
        tags=S,
        steps=(
            step("publish", event="a"),
            step("endpoint", op="disable"),
            step("attempt", event="a", label="while-disabled"),
            step("endpoint", op="enable"),
            step("attempt", event="a", label="enabled-again"),
        ),
        expectations=(
            DELIVERED,
            expect(
                "ledger_has",
                "the ledger says the attempt was held while disabled",
                side=Side.SENDER,
                event="a",
                cause="endpoint_disabled",
            ),
            expect(
                "wire_count", "exactly one request went out", side=Side.SENDER, event="a", equals=1
            ),
        ),
    ),
    Scenario(
        id="platform.fan-out",
        title="One delivery per active subscribed endpoint",
        guarantee="An event goes to every active endpoint subscribed to its type, once each; an "
        "endpoint subscribed to other types, and one configured after publication, get nothing.",
        severity=Severity.MUST,
        tags=S,
        steps=(
            step("endpoint", id="second"),
            step("endpoint", id="other-types", types=["invoice.paid"]),
            step("publish_event", event="a", type="renewal.reminder"),
            step("endpoint", id="later"),
            step("settle", event="a"),
        ),
        expectations=(
            DELIVERED,
            expect(
                "deliveries_to",
                "deliveries exist to the target and the second endpoint only",
                side=Side.SENDER,
                event="a",
                endpoints=[TARGET, "second"],
            ),
            expect(
                "wire_count",
                "the receivers saw one request per delivery",
                side=Side.SENDER,
                event="a",
                equals=2,
            ),
        ),
    ),
    Scenario(
        id="platform.event-only-status",
        title="No endpoint: an event-only status, no attempt made up",
        guarantee="An event published when no endpoint is configured is recorded as no_endpoint "
        "with no delivery and no attempt; nothing reaches any receiver.",
        severity=Severity.MUST,
        tags=S,
        steps=(
            step("endpoint", op="delete"),
            step("publish_event", event="a"),
        ),
        expectations=(
            expect(
                "event_status",
                "the event is no_endpoint",
                side=Side.SENDER,
                event="a",
                status="no_endpoint",
            ),
            expect("wire_count", "nothing was sent", side=Side.SENDER, event="a", equals=0),
        ),
    ),
    Scenario(
        id="platform.resend-after-2xx",
        title="Resend after a 2xx is a new real attempt",
        guarantee="Resending a delivered delivery sends the same event id and body again with a "
        "fresh timestamp and signature, and the lifetime attempt count goes on from 1 to 2.",
        severity=Severity.MUST,
        tags=S,
        steps=(
            step("publish", event="a"),
            step("attempt", event="a", label="first"),
            step("resend", event="a", label="resend"),
        ),
        expectations=(
            DELIVERED,
            expect("attempt_count", "two attempts", side=Side.SENDER, event="a", equals=2),
            expect("wire_count", "two requests went out", side=Side.SENDER, event="a", equals=2),
            expect("same_event_on_wire", "same event id and body", side=Side.SENDER, event="a"),
            expect("fresh_signatures", "each signed afresh", side=Side.SENDER, event="a"),
        ),
    ),
    Scenario(
        id="platform.resend-refuses-pending",
        title="Pending work cannot be resent",
        guarantee="A resend of a delivery that is still scheduled queues nothing and is refused "
        "with the stable code WEBHOOK_DELIVERY_NOT_REPLAYABLE.",
        severity=Severity.MUST,
        tags=S,
        steps=(
            step("publish", event="a"),
            step("resend", event="a", then_attempt=False),
        ),
        expectations=(
            expect(
                "resend_refused",
                "refused as not replayable (pending)",
                side=Side.SENDER,
                event="a",
                code="WEBHOOK_DELIVERY_NOT_REPLAYABLE",
                reason="pending",
            ),
            expect(
                "sender_state", "still scheduled", side=Side.SENDER, event="a", state="scheduled"
            ),
        ),
    ),
    Scenario(
        id="platform.export-cap",
        title="An export over 5000 rows is refused, never partial",
        guarantee="An export whose filters select more than 5000 rows is refused with "
        "EXPORT_TOO_LARGE before anything is written.",
        severity=Severity.MUST,
        tags=S,
        steps=(
            step("endpoint", op="delete"),
            step("publish_event", event="a", copies=5000),
            step("export"),
        ),
        expectations=(
            expect(
                "export_refused",
                "the export is refused",
                side=Side.SENDER,
                code="EXPORT_TOO_LARGE",
            ),
        ),
    ),
    Scenario(
        id="platform.throwing-transport",
        title="A dispatch that throws releases only its own claim",
        guarantee="When sending raises something that is no transport failure (an in-process "
        "app's exception), the claim is released with a one-minute delay and no attempt or "
        "result is made up; the next attempt delivers.",
        severity=Severity.MUST,
        tags=S,
        steps=(
            step("publish", event="a"),
            step("script", event="a", answers=({"error": "exception"},)),
            step("attempt", event="a", label="throws"),
            step("attempt", event="a", label="after-release"),
        ),
        expectations=(
            DELIVERED,
            expect(
                "ledger_has",
                "the ledger says the dispatch failed and was released",
                side=Side.SENDER,
                event="a",
                cause="dispatch_failed",
            ),
            expect(
                "attempt_count",
                "only the real attempt is recorded",
                side=Side.SENDER,
                event="a",
                equals=1,
            ),
        ),
    ),
)
