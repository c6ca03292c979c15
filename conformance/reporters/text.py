"""Plain-text rendering shared by the console reporter, JUnit bodies and the pytest plugin: one
failed scenario as its guarantee, then each broken expectation (graded ``must`` or ``should``)
with its reproduction — the first one, or every one when ``verbose``; and counted nouns."""

from __future__ import annotations

from conformance.results import Outcome, ScenarioResult

__all__ = ["counted", "describe_result"]


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 scenario``, ``2 scenarios`` (``plural`` for irregular nouns)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def describe_result(result: ScenarioResult, *, verbose: bool = True) -> str:
    """The human account of a failed or errored scenario (empty for a pass or a skip).

    Each reproduction is one shell line; without ``verbose`` only the first of a failure's is
    shown, with how many more there are."""
    scenario = result.scenario
    lines = [f"{scenario.id} [{result.severity.value}] — {scenario.title}"]
    lines.append(f"  guarantee: {scenario.guarantee}")
    if result.outcome is Outcome.ERROR:
        lines.append(f"  error: {result.message}")
        return "\n".join(lines)
    if result.observed_by == "status":
        lines.append("  observed by status codes only (no probe)")
    for failure in result.failures:
        grade = (failure.severity or scenario.severity).value
        lines.append(f"  expected: [{grade}] {failure.expected}")
        lines.append(f"  observed: {failure.observed}")
        commands = [line for line in failure.reproduce.splitlines() if line.strip()]
        if commands:
            shown = commands if verbose else commands[:1]
            lines.append("  reproduce:")
            lines.extend(f"    {command}" for command in shown)
            if len(shown) < len(commands):
                more = len(commands) - len(shown)
                lines.append(f"    (+{counted(more, 'more request')}: --verbose shows them)")
    return "\n".join(lines)
