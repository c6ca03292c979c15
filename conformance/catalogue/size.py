"""The size family: a body far past the limit the receiver declares is refused with 413 and
never applied (judged only when the limit is declared with ``--max-body``)."""

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
        steps=(step("deliver_oversized", event="a", label="oversized"),),
        expectations=(
            expect("status", "413", label="oversized", allowed=("413",)),
            expect("effects", "the probe shows no effect (unknown event)", event="a", equals=0),
        ),
    ),
)
