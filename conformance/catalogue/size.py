"""The size family, judged only when the receiver's limit is declared with ``--max-body``: a body
far past it is refused with 413 and never applied, and a genuine one just within it is accepted
and applied once."""

from __future__ import annotations

from conformance.model import Harness, Scenario, Severity, expect, step

__all__ = ["SCENARIOS"]

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        id="size.over-limit",
        title="Body well past the declared limit",
        guarantee="A correctly signed body of twice the declared --max-body (plus 1 KiB) is "
        "refused with 413 and never applied.",
        severity=Severity.SHOULD,
        tags=frozenset({Harness.R, Harness.C}),
        steps=(step("deliver_sized", event="a", label="oversized", size="over"),),
        expectations=(
            expect("status", "413", label="oversized", allowed=("413",)),
            expect("effects", "the probe shows no effect (unknown event)", event="a", equals=0),
        ),
    ),
    Scenario(
        id="size.within-limit",
        title="Body just within the declared limit",
        guarantee="A genuine delivery whose body is just under the declared --max-body (1 KiB "
        "less) is accepted and applied once: a receiver whose real limit is lower (a "
        "framework's default) loses every event that large.",
        severity=Severity.MUST,
        tags=frozenset({Harness.R, Harness.C}),
        steps=(step("deliver_sized", event="a", label="large", size="within"),),
        expectations=(
            expect("status", "2xx", label="large", allowed=("2xx",)),
            expect("effects", "the probe shows exactly 1 effect", event="a", equals=1),
        ),
    ),
)
