"""The console reporter: one live line per scenario, a summary table per family, then each
failure with its guarantee, the request as ``curl``, what came back and what was expected."""

from __future__ import annotations

import sys
from typing import TextIO

import click

from conformance.events import (
    Event,
    RunFinished,
    RunInterrupted,
    RunStarted,
    ScenarioFinished,
    ScenarioStarted,
)
from conformance.reporters.text import describe_result
from conformance.results import Outcome, ScenarioResult

__all__ = ["ConsoleReporter"]

_COLOURS = {
    Outcome.PASSED: "green",
    Outcome.FAILED: "red",
    Outcome.SKIPPED: "yellow",
    Outcome.ERROR: "magenta",
}


class ConsoleReporter:
    """Writes a human report to ``stream`` as the events arrive."""

    def __init__(self, stream: TextIO | None = None, *, colour: bool | None = None) -> None:
        self.stream = stream
        self.colour = colour
        target = stream if stream is not None else sys.stdout
        self.live = bool(target.isatty())

    def _echo(self, text: str = "") -> None:
        click.echo(text, file=self.stream, color=self.colour)

    def _paint(self, outcome: Outcome) -> str:
        return click.style(outcome.value.upper().ljust(7), fg=_COLOURS[outcome])

    def handle(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            if not event.target.startswith(("http://", "https://")):
                self._echo(
                    f"hookproof: {len(event.scenarios)} sender-side scenarios on "
                    f"{event.target} (seed {event.seed})"
                )
                return
            probe = (
                "with probe (effects observed)" if event.probe else "no probe (status codes only)"
            )
            self._echo(
                f"hookproof: {len(event.scenarios)} scenarios against {event.target} "
                f"({event.scheme} scheme, {probe}, seed {event.seed})"
            )
        elif isinstance(event, ScenarioStarted) and self.live:
            width = len(str(event.total))
            click.echo(
                f"[{event.index:>{width}}/{event.total}] running {event.scenario.id}…",
                file=self.stream,
                nl=False,
            )
        elif isinstance(event, ScenarioFinished):
            result = event.result
            width = len(str(event.total))
            extra = f"  — {result.message}" if result.message else ""
            prefix = "\r\x1b[2K" if self.live else ""
            self._echo(
                f"{prefix}[{event.index:>{width}}/{event.total}] {self._paint(result.outcome)} "
                f"{result.scenario.id} ({result.duration_s * 1000:.0f} ms){extra}"
            )
        elif isinstance(event, RunInterrupted):
            prefix = "\r\x1b[2K" if self.live else ""
            self._echo(
                f"{prefix}run stopped: {event.reason} "
                f"({event.completed} of {event.total} scenarios finished)"
            )
        elif isinstance(event, RunFinished):
            self._summary(event)

    def _summary(self, event: RunFinished) -> None:
        families: dict[str, dict[Outcome, int]] = {}
        for result in event.results:
            counts = families.setdefault(result.scenario.family, dict.fromkeys(Outcome, 0))
            counts[result.outcome] += 1
        self._echo()
        header = f"{'family':<14}{'passed':>8}{'failed':>8}{'skipped':>9}{'errors':>8}"
        self._echo(header)
        self._echo("-" * len(header))
        for family, counts in families.items():
            self._echo(
                f"{family:<14}{counts[Outcome.PASSED]:>8}{counts[Outcome.FAILED]:>8}"
                f"{counts[Outcome.SKIPPED]:>9}{counts[Outcome.ERROR]:>8}"
            )
        broken: list[ScenarioResult] = [
            r for r in event.results if r.outcome in (Outcome.FAILED, Outcome.ERROR)
        ]
        if broken:
            self._echo()
            self._echo(click.style("Failures", bold=True))
            for result in broken:
                self._echo()
                self._echo(describe_result(result))
        summary = event.summary
        self._echo()
        self._echo(
            f"{summary.passed} passed, {summary.failed} failed, {summary.skipped} skipped, "
            f"{summary.errors} errors in {event.duration_s:.2f} s"
            + (" (run stopped early)" if event.interrupted else "")
        )
