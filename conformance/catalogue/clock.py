"""The clock-skew family: the signed timestamp is accepted within the tolerance, in both
directions, and refused outside it — even for an event the receiver already knows."""

from __future__ import annotations

from conformance.model import TIMED, Harness, Scenario, Severity, expect, step

__all__ = ["SCENARIOS"]

RC = frozenset({Harness.R, Harness.C})


def _edge(name: str, title: str, direction: int, inside: bool, severity: Severity) -> Scenario:
    where = "past" if direction < 0 else "future"
    if inside:
        guarantee = (
            f"A timestamp just inside the tolerance in the {where} is accepted "
            "(clocks are never perfectly in sync)."
        )
        expectations = (
            expect("status", "2xx", label="delivery", allowed=("2xx",)),
            expect("effects", "the probe shows exactly 1 effect", event="a", equals=1),
        )
    else:
        guarantee = f"A timestamp just outside the tolerance in the {where} is refused with 401."
        expectations = (
            expect("status", "401", label="delivery", allowed=("401",)),
            expect("effects", "the probe shows no effect (unknown event)", event="a", equals=0),
        )
    return Scenario(
        id=f"clock.{name}",
        title=title,
        guarantee=guarantee,
        severity=severity,
        tags=RC,
        steps=(
            step(
                "deliver",
                event="a",
                label="delivery",
                tolerances=direction,
                margins=-direction if inside else direction,
            ),
        ),
        expectations=expectations,
        schemes=TIMED,
    )


SCENARIOS: tuple[Scenario, ...] = (
    _edge("past-inside", "Timestamp just inside the tolerance (past)", -1, True, Severity.MUST),
    _edge("past-outside", "Timestamp just outside the tolerance (past)", -1, False, Severity.MUST),
    _edge("future-inside", "Timestamp just inside the tolerance (future)", 1, True, Severity.MUST),
    _edge(
        "future-outside", "Timestamp just outside the tolerance (future)", 1, False, Severity.SHOULD
    ),
    Scenario(
        id="clock.far-future",
        title="Timestamp a day in the future",
        guarantee="A timestamp far in the future is refused with 401, so a captured request "
        "cannot be pre-signed for later use.",
        severity=Severity.SHOULD,
        tags=RC,
        steps=(step("deliver", event="a", label="delivery", seconds=86_400),),
        expectations=(
            expect("status", "401", label="delivery", allowed=("401",)),
            expect("effects", "the probe shows no effect (unknown event)", event="a", equals=0),
        ),
        schemes=TIMED,
    ),
    Scenario(
        id="clock.replay-after-window",
        title="Captured request replayed after the window",
        guarantee="A request captured and replayed after the tolerance window is refused with 401, "
        "even for an event the receiver has already applied (verify before dedupe).",
        severity=Severity.MUST,
        tags=RC,
        steps=(
            step("deliver", event="a", label="original"),
            step("deliver", event="a", label="replay", tolerances=-1, seconds=-60),
        ),
        expectations=(
            expect("status", "the original is 2xx", label="original", allowed=("2xx",)),
            expect("status", "the replay is 401", label="replay", allowed=("401",)),
            expect("effects", "the probe shows exactly 1 effect", event="a", equals=1),
        ),
        schemes=TIMED,
    ),
    Scenario(
        id="clock.stale-then-genuine",
        title="Stale copy first, genuine after",
        guarantee="A copy whose timestamp is outside the tolerance leaves no trace: it is refused "
        "with a 4xx, and the fresh genuine copy that follows is accepted and applied once.",
        severity=Severity.MUST,
        tags=RC,
        steps=(
            step("deliver", event="a", label="stale", tolerances=-1, seconds=-60),
            step("deliver", event="a", label="genuine"),
        ),
        expectations=(
            expect("status", "the stale copy is 4xx", label="stale", allowed=("4xx",)),
            expect("status", "the genuine copy is 2xx", label="genuine", allowed=("2xx",)),
            expect("effects", "the probe shows exactly 1 effect", event="a", equals=1),
        ),
        schemes=TIMED,
    ),
)
