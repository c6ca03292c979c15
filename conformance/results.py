"""What a run finds: a verdict per scenario (outcome, failures with their reproduction) and the
summary. Plain immutable data that every reporter reads and none computes."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from conformance.model import Scenario

__all__ = ["Failure", "Outcome", "ScenarioResult", "Summary"]


class Outcome(enum.StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    ERROR = "error"


@dataclass(frozen=True)
class Failure:
    """One broken expectation: what was expected, what was observed, and how to reproduce it."""

    expected: str
    observed: str
    reproduce: str


@dataclass(frozen=True)
class ScenarioResult:
    """The verdict on one scenario. ``message`` explains a skip or an error."""

    scenario: Scenario
    outcome: Outcome
    observed_by: str | None
    duration_s: float
    failures: tuple[Failure, ...] = ()
    message: str = ""
    harness: str = ""


@dataclass(frozen=True)
class Summary:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0

    @classmethod
    def of(cls, results: Iterable[ScenarioResult]) -> Summary:
        counts = dict.fromkeys(Outcome, 0)
        for result in results:
            counts[result.outcome] += 1
        return cls(
            counts[Outcome.PASSED],
            counts[Outcome.FAILED],
            counts[Outcome.SKIPPED],
            counts[Outcome.ERROR],
        )

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.errors == 0

    def as_dict(self) -> dict[str, int]:
        return {
            "passed": self.passed,
            "failed": self.failed,
            "skipped": self.skipped,
            "errors": self.errors,
        }
