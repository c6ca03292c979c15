"""The signature family: a receiver accepts exactly the deliveries signed with an active secret
over the raw bytes it received, and refuses every other one with a 4xx — never a 5xx."""

from __future__ import annotations

from conformance.model import Harness, Scenario, Severity, expect, step

__all__ = ["SCENARIOS"]

RC = frozenset({Harness.R, Harness.C})

ACKED = expect("status", "every answer is 2xx", label="delivery", allowed=("2xx",))
APPLIED_ONCE = expect("effects", "the probe shows exactly 1 effect", event="a", equals=1)
NOT_APPLIED = expect("effects", "the probe shows no effect (unknown event)", event="a", equals=0)


def _missing(role: str, words: str, schemes: frozenset[str]) -> Scenario:
    return Scenario(
        id=f"signature.missing-{role}",
        title=f"Missing {words}",
        guarantee=f"A delivery without its {words} is refused with 400 and never applied.",
        severity=Severity.MUST,
        tags=RC,
        steps=(step("deliver", event="a", label="delivery", mutation=f"missing:{role}"),),
        expectations=(
            expect("status", "400", label="delivery", allowed=("400",)),
            NOT_APPLIED,
        ),
        schemes=schemes,
    )


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        id="signature.valid",
        title="Valid delivery",
        guarantee="A correctly signed delivery of the generic event is acknowledged with 2xx and "
        "applied once.",
        severity=Severity.MUST,
        tags=RC,
        steps=(step("deliver", event="a", label="delivery"),),
        expectations=(ACKED, APPLIED_ONCE),
    ),
    Scenario(
        id="signature.tampered-body",
        title="Tampered body",
        guarantee="A body changed after signing is refused with 401 and never applied.",
        severity=Severity.MUST,
        tags=RC,
        steps=(step("deliver", event="a", label="delivery", mutation="tampered-body"),),
        expectations=(
            expect("status", "401", label="delivery", allowed=("401",)),
            NOT_APPLIED,
        ),
    ),
    Scenario(
        id="signature.wrong-secret",
        title="Wrong secret",
        guarantee="A delivery signed with a secret the receiver does not hold is refused with 401.",
        severity=Severity.MUST,
        tags=RC,
        steps=(step("deliver", event="a", label="delivery", mutation="wrong-secret"),),
        expectations=(
            expect("status", "401", label="delivery", allowed=("401",)),
            NOT_APPLIED,
        ),
    ),
    _missing("id", "event id", frozenset({"standard", "stripe", "github"})),
    _missing("timestamp", "signed timestamp", frozenset({"standard", "stripe"})),
    _missing("signature", "signature header", frozenset({"standard", "stripe", "github"})),
    Scenario(
        id="signature.malformed-headers",
        title="Malformed headers (fuzzed)",
        guarantee="Garbage in any webhook header is refused with a 4xx, never a 5xx, and never "
        "applied.",
        severity=Severity.MUST,
        tags=RC,
        steps=(step("deliver_fuzzed", event="a", label="fuzzed", cases=12),),
        expectations=(
            expect("status", "every answer is 4xx", label="fuzzed", allowed=("4xx",)),
            NOT_APPLIED,
        ),
    ),
    Scenario(
        id="signature.rotation",
        title="Secret rotation: two signatures, one valid",
        guarantee="A delivery carrying several signatures is accepted when any one matches an "
        "active secret, wherever it appears in the header.",
        severity=Severity.MUST,
        tags=RC,
        steps=(step("deliver", event="a", label="delivery", mutation="rotation"),),
        expectations=(ACKED, APPLIED_ONCE),
        schemes=frozenset({"standard", "stripe"}),
    ),
    Scenario(
        id="signature.unknown-version",
        title="Unknown signature version ignored",
        guarantee="A signature entry of an unknown version is skipped, never an error by itself.",
        severity=Severity.MUST,
        tags=RC,
        steps=(step("deliver", event="a", label="delivery", mutation="unknown-version"),),
        expectations=(ACKED, APPLIED_ONCE),
        schemes=frozenset({"standard", "stripe"}),
    ),
    Scenario(
        id="signature.raw-bytes",
        title="Raw bytes verified (unusual but valid JSON)",
        guarantee="The signature is checked over the exact bytes received, so odd whitespace and "
        "escapes in valid JSON verify.",
        severity=Severity.MUST,
        tags=RC,
        steps=(step("deliver", event="a", label="delivery", body="unusual"),),
        expectations=(ACKED, APPLIED_ONCE),
    ),
)
