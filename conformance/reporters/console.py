"""The console reporter: one live line per scenario, a summary table per family, what to fix
(failures grouped by likely cause, one line each), then each failure with its guarantee, what was
expected (graded ``must`` or ``should``), what came back and one ``curl`` reproduction (every one
with ``verbose``).

It writes through one :func:`receiver.commands.console.make_console` console: colour only on a
terminal without ``NO_COLOR`` (or when asked), and on a terminal a transient status line shows the
scenario running now.
"""

from __future__ import annotations

import sys
from typing import TextIO

from rich.status import Status
from rich.text import Text

from conformance.causes import PLAINEST, REFUSED_AUTHENTIC, UNAPPLIED, group_by_cause
from conformance.events import (
    Event,
    RunFinished,
    RunInterrupted,
    RunStarted,
    ScenarioFinished,
    ScenarioStarted,
)
from conformance.model import Harness
from conformance.reporters.text import counted, describe_result
from conformance.results import Outcome, ScenarioResult
from receiver.commands.console import make_console, print_table

__all__ = ["ConsoleReporter"]

_COLOURS = {
    Outcome.PASSED: "green",
    Outcome.FAILED: "red",
    Outcome.SKIPPED: "yellow",
    Outcome.ERROR: "magenta",
}


class ConsoleReporter:
    """Writes a human report to ``stream`` as the events arrive."""

    def __init__(
        self, stream: TextIO | None = None, *, colour: bool | None = None, verbose: bool = False
    ) -> None:
        self.stream = stream
        self.colour = colour
        self.verbose = verbose
        target = stream if stream is not None else sys.stdout
        self.console = make_console(stream, colour=colour)
        # The live status line is cursor movement: only on a terminal that takes escape codes.
        self.live = bool(target.isatty()) and self.console.color_system is not None
        self._status: Status | None = None

    def _echo(self, text: str | Text = "") -> None:
        self.console.print(text)

    def _paint(self, outcome: Outcome) -> Text:
        return Text(outcome.value.upper().ljust(7), style=_COLOURS[outcome])

    def _running(self, text: str) -> None:
        if self._status is None:
            self._status = self.console.status(text)
            self._status.start()
        else:
            self._status.update(text)

    def _stop_running(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def handle(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            if not event.target.startswith(("http://", "https://")):
                self._echo(
                    f"hookproof: {counted(len(event.scenarios), 'sender-side scenario')} on "
                    f"{event.target} (seed {event.seed})"
                )
                return
            if event.scenarios and all(Harness.X in s.tags for s in event.scenarios):
                self._echo(
                    f"hookproof: {counted(len(event.scenarios), 'scenario')} judging the sender "
                    f"that delivers to {event.target}/… ({event.scheme} scheme, seed {event.seed})"
                )
                return
            probe = (
                "with probe (effects observed)" if event.probe else "no probe (status codes only)"
            )
            self._echo(
                f"hookproof: {counted(len(event.scenarios), 'scenario')} against {event.target} "
                f"({event.scheme} scheme, {probe}, seed {event.seed})"
            )
            clock = event.options.get("receiver_clock")
            if clock:
                self._echo(f"note: {clock}")
        elif isinstance(event, ScenarioStarted) and self.live:
            width = len(str(event.total))
            self._running(f"[{event.index:>{width}}/{event.total}] running {event.scenario.id}…")
        elif isinstance(event, ScenarioFinished):
            result = event.result
            width = len(str(event.total))
            extra = f"  — {result.message}" if result.message else ""
            if result.outcome is Outcome.FAILED and not result.breaks_must:
                extra += "  [should: not fatal]"
            self._echo(
                Text.assemble(
                    f"[{event.index:>{width}}/{event.total}] ",
                    self._paint(result.outcome),
                    f" {result.scenario.id} ({result.duration_s * 1000:.0f} ms){extra}",
                )
            )
        elif isinstance(event, RunInterrupted):
            prefix = "\r\x1b[2K" if self.live else ""
            self._echo(
                f"{prefix}run stopped: {event.reason} "
                f"({event.completed} of {counted(event.total, 'scenario')} finished)"
            )
        elif isinstance(event, RunFinished):
            self._stop_running()
            self._summary(event)

    def _summary(self, event: RunFinished) -> None:
        families: dict[str, dict[Outcome, int]] = {}
        for result in event.results:
            counts = families.setdefault(result.scenario.family, dict.fromkeys(Outcome, 0))
            counts[result.outcome] += 1
        self._echo()
        columns = (Outcome.PASSED, Outcome.FAILED, Outcome.SKIPPED, Outcome.ERROR)
        print_table(
            self.console,
            ("family", "passed", "failed", "skipped", "errors"),
            [(family, *(str(counts[c]) for c in columns)) for family, counts in families.items()],
            right=range(1, 5),
        )
        broken: list[ScenarioResult] = [
            r for r in event.results if r.outcome in (Outcome.FAILED, Outcome.ERROR)
        ]
        causes = group_by_cause(event.results)
        if causes:
            self._echo()
            self._echo(Text("What to fix", style="bold"))
            for cause in causes:
                self._echo(f"  - {cause.line}: {', '.join(cause.scenarios)}")
        # Scenarios that only failed because what the plainest delivery met (a refusal, an
        # acknowledgement without effect) met them too are one line each unless --verbose: the
        # cause above already says what to fix.
        leading = causes[0].key if causes else None
        folded = (
            set(causes[0].scenarios) - {PLAINEST}
            if leading in (REFUSED_AUTHENTIC, UNAPPLIED) and not self.verbose
            else set()
        )
        same = "refusal" if leading == REFUSED_AUTHENTIC else "cause"
        if broken:
            self._echo()
            self._echo(Text("Failures", style="bold"))
            for result in broken:
                if result.scenario.id not in folded:
                    self._echo()
                    self._failure(result)
            briefly = [result for result in broken if result.scenario.id in folded]
            if briefly:
                self._echo()
                self._echo(f"Failed by the same {same} (--verbose shows each):")
                for result in briefly:
                    scenario = result.scenario
                    self._echo(f"  {scenario.id} [{result.severity.value}] — {scenario.title}")
        summary = event.summary
        failed = f"{summary.failed} failed"
        if summary.failed:
            failed += f" ({summary.must_failed} must, {summary.should_failed} should)"
        self._echo()
        self._echo(
            f"{summary.passed} passed, {failed}, {summary.skipped} skipped, "
            f"{counted(summary.errors, 'error')} in {event.duration_s:.2f} s"
            + (" (run stopped early)" if event.interrupted else "")
        )
        if summary.should_failed and summary.ok:
            self._echo(
                "only should-level expectations failed: conventions and recommendations, "
                "not broken guarantees (exit status 0)"
            )

    def _failure(self, result: ScenarioResult) -> None:
        """Prose wraps to the terminal; a reproduction stays one line (copy and paste)."""
        for line in describe_result(result, verbose=self.verbose).splitlines():
            command = line.startswith("    ") and not line.startswith("    (+")
            self.console.print(line, soft_wrap=command or None)
