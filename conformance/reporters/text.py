"""Plain-text rendering shared by the console reporter, JUnit bodies and the pytest plugin: one
failed scenario as its guarantee, then each broken expectation with its reproduction."""

from __future__ import annotations

import textwrap

from conformance.results import Outcome, ScenarioResult

__all__ = ["describe_result"]


def describe_result(result: ScenarioResult) -> str:
    """The human account of a failed or errored scenario (empty for a pass or a skip)."""
    scenario = result.scenario
    lines = [f"{scenario.id} [{scenario.severity.value}] — {scenario.title}"]
    lines.append(f"  guarantee: {scenario.guarantee}")
    if result.outcome is Outcome.ERROR:
        lines.append(f"  error: {result.message}")
        return "\n".join(lines)
    if result.observed_by == "status":
        lines.append("  observed by status codes only (no probe)")
    for failure in result.failures:
        lines.append(f"  expected: {failure.expected}")
        lines.append(f"  observed: {failure.observed}")
        if failure.reproduce:
            lines.append("  reproduce:")
            lines.append(textwrap.indent(failure.reproduce, "    "))
    return "\n".join(lines)
