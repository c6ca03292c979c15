"""The console reporter through rich: the same words as before, no escape codes with NO_COLOR or
into a pipe (not even the live status line), and a run's report fits an 80-column terminal."""

from __future__ import annotations

import io
import re

import pytest

from conformance.catalogue import CATALOGUE
from conformance.events import Event, RunFinished, RunStarted, ScenarioFinished, ScenarioStarted
from conformance.reporters import ConsoleReporter
from conformance.results import Outcome, ScenarioResult, Summary

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _events() -> list[Event]:
    scenarios = tuple(CATALOGUE)[:6]
    outcomes = [Outcome.PASSED, Outcome.SKIPPED, Outcome.PASSED] * 2
    results = tuple(
        ScenarioResult(
            scenario=s,
            outcome=o,
            observed_by="status",
            duration_s=0.012,
            message="no probe given: effects cannot be observed" if o is Outcome.SKIPPED else "",
        )
        for s, o in zip(scenarios, outcomes, strict=True)
    )
    total = len(scenarios)
    events: list[Event] = [
        RunStarted("http://127.0.0.1:8000/webhooks", "standard", scenarios, False, 7)
    ]
    for index, result in enumerate(results, start=1):
        events.append(ScenarioStarted(result.scenario, index, total))
        events.append(ScenarioFinished(result, index, total))
    events.append(RunFinished(results, Summary.of(results), 0.5))
    return events


def _report(stream: io.StringIO) -> str:
    reporter = ConsoleReporter(stream)
    for event in _events():
        reporter.handle(event)
    return stream.getvalue()


@pytest.fixture(autouse=True)
def _terminal_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("NO_COLOR", raising=False)


def test_no_color_terminal_gets_no_escape_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    out = _report(Terminal())
    assert "\x1b" not in out
    first = CATALOGUE.ids()[0]
    assert f"[1/6] PASSED  {first} (12 ms)" in out
    assert "4 passed, 0 failed, 2 skipped, 0 errors in 0.50 s" in out


def test_a_pipe_gets_no_escape_codes_and_the_same_words() -> None:
    out = _report(io.StringIO())
    assert "\x1b" not in out
    assert "running" not in out  # the live status line is for terminals only
    header = next(line for line in out.splitlines() if line.startswith("family"))
    assert header.split() == ["family", "passed", "failed", "skipped", "errors"]


def test_a_colour_terminal_gets_colour_and_a_report_within_80_columns() -> None:
    out = _report(Terminal())
    assert "\x1b[" in out
    lines = [ANSI.sub("", line) for line in out.replace("\r", "\n").splitlines()]
    assert max(len(line) for line in lines) <= 80
    assert "4 passed, 0 failed, 2 skipped, 0 errors in 0.50 s" in lines
