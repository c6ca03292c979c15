"""What a run finds: a verdict per scenario (outcome, failures with their reproduction) and the
summary. Plain immutable data that every reporter reads and none computes."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from conformance.model import Scenario, Severity

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
    severity: Severity | None = None
    """How much it matters; ``None`` until the harness grades it (the scenario's severity)."""
    cause: str = ""
    """The likely cause's key in :data:`conformance.causes.CAUSES` (empty: the scenario's own)."""
    evidence: tuple[int, ...] = ()
    """The lines of ``reproduce`` (0-based, blank lines not counted) that carry the evidence:
    what the console shows without ``--verbose``. Empty: the first line."""


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

    @property
    def severity(self) -> Severity:
        """A failed scenario's worst failure (``must`` if any failure is); otherwise the
        scenario's declared severity."""
        graded = {f.severity or self.scenario.severity for f in self.failures}
        if self.outcome is Outcome.FAILED and graded:
            return Severity.MUST if Severity.MUST in graded else Severity.SHOULD
        return self.scenario.severity

    @property
    def breaks_must(self) -> bool:
        """Whether this verdict fails a run: an error, or a failure graded ``must``."""
        if self.outcome is Outcome.ERROR:
            return True
        return self.outcome is Outcome.FAILED and self.severity is Severity.MUST


@dataclass(frozen=True)
class Summary:
    """Counts by outcome; ``should_failed`` of the ``failed`` broke only ``should`` expectations
    (a convention or a recommendation), which does not fail the run."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0
    should_failed: int = 0

    @classmethod
    def of(cls, results: Iterable[ScenarioResult]) -> Summary:
        counts = dict.fromkeys(Outcome, 0)
        should = 0
        for result in results:
            counts[result.outcome] += 1
            should += result.outcome is Outcome.FAILED and not result.breaks_must
        return cls(
            counts[Outcome.PASSED],
            counts[Outcome.FAILED],
            counts[Outcome.SKIPPED],
            counts[Outcome.ERROR],
            should,
        )

    @property
    def must_failed(self) -> int:
        return self.failed - self.should_failed

    @property
    def ok(self) -> bool:
        """No ``must`` failure and no error (``should`` failures are reported, not fatal)."""
        return self.must_failed == 0 and self.errors == 0

    def as_dict(self) -> dict[str, int]:
        return {
            "passed": self.passed,
            "failed": self.failed,
            "skipped": self.skipped,
            "errors": self.errors,
        }
