"""The leases family: a lease is an operational mechanism, not proof of processing. Claims are
compare-and-set with a fencing token, so a stale worker's ack is refused and one claim wins."""

from __future__ import annotations

from conformance.model import Harness, Scenario, Severity, Side, expect, step

__all__ = ["SCENARIOS"]

S = frozenset({Harness.S})
DELIVERED = expect(
    "sender_state", "the delivery ends delivered", side=Side.SENDER, event="a", state="delivered"
)

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        id="leases.expired-reclaimed",
        title="Expired lease re-claimed, stale ack refused",
        guarantee="When a lease expires mid-send, another worker re-claims and resends; the first "
        "worker's late ack is refused by its stale fencing token and recorded.",
        severity=Severity.MUST,
        tags=S,
        steps=(
            step("publish", event="a"),
            step("attempt", event="a", label="first", fault="lease_expiry_in_flight"),
        ),
        expectations=(
            DELIVERED,
            expect(
                "ledger_has",
                "the refused stale ack is in the ledger",
                side=Side.SENDER,
                event="a",
                cause="stale_ack_refused",
            ),
            expect(
                "wire_count", "the receiver saw both copies", side=Side.SENDER, event="a", equals=2
            ),
        ),
    ),
    Scenario(
        id="leases.two-workers-race",
        title="Two workers race for one lease",
        guarantee="Two workers claiming the same delivery at once: exactly one wins, one request "
        "goes out, and the lost race is recorded.",
        severity=Severity.MUST,
        tags=S,
        steps=(
            step("publish", event="a"),
            step("attempt", event="a", label="first", fault="second_worker"),
        ),
        expectations=(
            DELIVERED,
            expect(
                "ledger_has",
                "the lost claim race is in the ledger",
                side=Side.SENDER,
                event="a",
                cause="claim_race_lost",
            ),
            expect(
                "wire_count", "exactly one request went out", side=Side.SENDER, event="a", equals=1
            ),
        ),
    ),
)
