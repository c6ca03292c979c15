"""The response family: how a receiver answers, not only what — in time, only after the
commit, with problem details, and without echoing secrets."""

from __future__ import annotations

from conformance.model import DESCRIBED_SECRETS, Harness, Scenario, Severity, expect, step

__all__ = ["SCENARIOS"]

RC = frozenset({Harness.R, Harness.C})

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        id="response.within-timeout",
        title="Answers within the timeout budget (p99)",
        guarantee="The p99 latency of N valid deliveries stays under the sender's timeout, so "
        "acknowledged work is not retried as a timeout.",
        severity=Severity.MUST,
        tags=RC,
        steps=(step("deliver_many", label="samples"),),
        expectations=(
            expect(
                "status",
                "every sample is 2xx within the timeout",
                label="samples",
                allowed=("2xx",),
            ),
            expect("latency", "p99 latency below the timeout", label="samples", quantile=0.99),
        ),
    ),
    Scenario(
        id="response.ack-after-commit",
        title="2xx only once committed",
        guarantee="A 2xx is sent only after the event is durably committed: the probe, read "
        "right after the 2xx, shows it committed with its effect.",
        severity=Severity.MUST,
        tags=RC,
        steps=(step("deliver", event="a", label="delivery"),),
        expectations=(
            expect("status", "2xx", label="delivery", allowed=("2xx",)),
            expect(
                "committed",
                "the probe shows committed with 1 effect right after the 2xx",
                event="a",
            ),
        ),
        needs_probe=True,
    ),
    Scenario(
        id="response.problem-details",
        title="Refusals carry problem details",
        guarantee="A refused delivery is answered with an application/problem+json body "
        "(RFC 9457), so the sender can log why.",
        severity=Severity.SHOULD,
        tags=RC,
        steps=(
            step("deliver", event="a", label="refusals", mutation="tampered-body"),
            step("deliver", event="b", label="refusals", mutation="missing:signature"),
        ),
        expectations=(
            expect("status", "every refusal is 4xx", label="refusals", allowed=("4xx",)),
            expect("problem_json", "every refusal is application/problem+json", label="refusals"),
        ),
    ),
    Scenario(
        id="response.no-secret-leak",
        title="Errors never echo secrets or signatures",
        guarantee="No answer contains the secret, the signature sent, or the signature the "
        "receiver expected, as is, JSON-escaped (PHP writes / as \\/) or percent-encoded.",
        severity=Severity.MUST,
        tags=RC,
        steps=(
            step("deliver", event="a", label="answers", mutation="tampered-body"),
            step("deliver", event="b", label="answers", mutation="wrong-secret"),
            step("deliver", event="c", label="answers", tolerances=-1, seconds=-60),
        ),
        expectations=(
            expect("no_leak", "no answer echoes a secret or signature", label="answers"),
        ),
    ),
    Scenario(
        id="response.no-secret-hint",
        title="Refusals name no part of the secret",
        guarantee="A delivery signed with another secret whose signature header describes that "
        "secret (masked but for its last four characters, as the platform's sender does) is "
        "refused, and the answer names no part of the receiver's own secret. stripe-node "
        "compares the description with the secret it holds and names that secret's length and "
        "last four characters in its error message, which Stripe's sample sends back "
        "(`Webhook Error: ${err.message}`): not enough to forge a signature, but part of the "
        "secret, told to whoever asks.",
        severity=Severity.SHOULD,
        tags=RC,
        schemes=DESCRIBED_SECRETS,
        steps=(step("deliver", event="a", label="hinted", mutation="secret-hint"),),
        expectations=(
            expect("status", "the delivery is refused", label="hinted", allowed=("4xx",)),
            expect(
                "no_secret_part",
                "the answer names no part of the receiver's secret",
                label="hinted",
            ),
        ),
    ),
)
