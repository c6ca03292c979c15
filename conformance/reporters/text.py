"""Plain-text rendering shared by the console reporter, JUnit bodies and the pytest plugin: one
failed scenario as its guarantee, then each broken expectation (graded ``must`` or ``should``)
with its reproduction — the lines carrying its evidence (the first by default), or every one
when ``verbose``; and counted nouns."""

from __future__ import annotations

from conformance.results import Outcome, ScenarioResult

__all__ = ["counted", "describe_result"]


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 scenario``, ``2 scenarios`` (``plural`` for irregular nouns)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def describe_result(result: ScenarioResult, *, verbose: bool = True) -> str:
    """The human account of a failed or errored scenario (empty for a pass or a skip).

    Each reproduction is one line (a shell command, a sender's attempt); without ``verbose``
    only the lines a failure names as its evidence (by default the first) are shown, with how
    many more there are."""
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
            shown = commands if verbose else _evidence(commands, failure.evidence)
            lines.append("  reproduce:")
            lines.extend(f"    {command}" for command in shown)
            if len(shown) < len(commands):
                more = len(commands) - len(shown)
                lines.append(f"    (+{counted(more, 'more request')}: --verbose shows them)")
    return "\n".join(lines)


def _evidence(lines: list[str], evidence: tuple[int, ...]) -> list[str]:
    """The lines named by ``evidence`` (in order, each once), or the first line without any."""
    picked = [lines[i] for i in sorted(set(evidence)) if 0 <= i < len(lines)]
    return picked or lines[:1]
