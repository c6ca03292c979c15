"""The engine's promise: every run ends with ``RunFinished``, whatever the harness does — a harness
that raises is one ``error`` scenario (and the run goes on), an interrupt or a cancellation yields
``RunInterrupted`` then ``RunFinished`` (and still stops the caller), and ``max_time`` bounds the
run. The reporters render both."""

from __future__ import annotations

import asyncio
import io
import json
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import pytest

from conformance.catalogue import CATALOGUE
from conformance.engine import execute
from conformance.events import (
    Event,
    RunFinished,
    RunInterrupted,
    ScenarioErrored,
    ScenarioFinished,
)
from conformance.model import Harness, Scenario
from conformance.reporters import ConsoleReporter, JsonReporter, JUnitReporter, Reporter
from conformance.results import Outcome, ScenarioResult, Summary
from conformance.session import _feed

from .report_schema import validate_report

SCENARIOS = CATALOGUE.select(harness=Harness.C)[:3]


class Scripted:
    """A harness whose second scenario does what ``second`` says; the others pass."""

    def __init__(self, second: str) -> None:
        self.second = second
        self.ran: list[str] = []
        self.hanging = asyncio.Event()

    async def run(self, scenario: Scenario) -> ScenarioResult:
        self.ran.append(scenario.id)
        if scenario is SCENARIOS[1]:
            if self.second == "raise":
                raise RuntimeError("boom")
            if self.second == "interrupt":
                raise KeyboardInterrupt
            if self.second == "hang":
                self.hanging.set()
                await asyncio.Event().wait()
        return ScenarioResult(scenario, Outcome.PASSED, None, 0.0)


async def _collect(harness: Scripted, **options: float) -> list[Event]:
    events: list[Event] = []
    run = execute(
        SCENARIOS,
        harness,
        target="http://x.test/",
        scheme="standard",
        probe=False,
        seed=1,
        **options,
    )
    async for event in run:
        events.append(event)
    return events


def _kinds(events: Sequence[Event]) -> list[str]:
    return [type(e).__name__ for e in events]


def test_a_harness_that_raises_errors_its_scenario_and_the_run_goes_on() -> None:
    harness = Scripted("raise")
    events = asyncio.run(_collect(harness))
    assert harness.ran == [s.id for s in SCENARIOS]
    errored = [e for e in events if isinstance(e, ScenarioErrored)]
    assert [e.scenario for e in errored] == [SCENARIOS[1]]
    assert "RuntimeError: boom" in errored[0].reason
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert finished.interrupted == ""
    assert [r.outcome for r in finished.results] == [Outcome.PASSED, Outcome.ERROR, Outcome.PASSED]
    assert finished.results[1].message == errored[0].reason
    assert (finished.summary.passed, finished.summary.errors) == (2, 1)


def test_an_interrupt_yields_interrupted_then_finished_and_still_stops_the_caller() -> None:
    harness = Scripted("interrupt")
    events: list[Event] = []

    async def consume() -> None:
        async for event in execute(
            SCENARIOS, harness, target="http://x.test/", scheme="standard", probe=False, seed=1
        ):
            events.append(event)

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(consume())
    assert harness.ran == [s.id for s in SCENARIOS[:2]]
    assert _kinds(events)[-2:] == ["RunInterrupted", "RunFinished"]
    interrupted, finished = events[-2], events[-1]
    assert isinstance(interrupted, RunInterrupted)
    assert (interrupted.reason, interrupted.completed, interrupted.total) == ("interrupted", 1, 3)
    assert isinstance(finished, RunFinished)
    assert finished.interrupted == "interrupted"
    assert len(finished.results) == 1


def test_a_cancelled_run_still_reaches_every_reporter_with_a_finished_event(
    tmp_path: Path,
) -> None:
    harness = Scripted("hang")
    collected: list[Event] = []

    class Keep:
        def handle(self, event: Event) -> None:
            collected.append(event)

    json_path = tmp_path / "report.json"

    async def main() -> None:
        run = execute(
            SCENARIOS, harness, target="http://x.test/", scheme="standard", probe=False, seed=1
        )
        task = asyncio.create_task(_feed(run, [Keep(), JsonReporter(json_path)]))
        await harness.hanging.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert _kinds(collected)[-2:] == ["RunInterrupted", "RunFinished"]
    document = json.loads(json_path.read_text(encoding="utf-8"))
    assert validate_report(document) == []
    assert document["interrupted"] == "cancelled"
    assert [s["outcome"] for s in document["scenarios"]] == ["passed"]


def test_max_time_bounds_the_run() -> None:
    harness = Scripted("hang")
    started = time.monotonic()
    events = asyncio.run(_collect(harness, max_time=0.3))
    assert time.monotonic() - started < 10  # the hanging scenario is cut at 0.3 s
    assert harness.ran == [s.id for s in SCENARIOS[:2]]  # the third never starts
    errored = [e for e in events if isinstance(e, ScenarioErrored)]
    assert len(errored) == 1
    assert "max_time 0.3 s" in errored[0].reason
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert finished.interrupted == errored[0].reason
    assert [r.outcome for r in finished.results] == [Outcome.PASSED, Outcome.ERROR]
    assert not finished.summary.ok


def test_the_reporters_render_an_errored_scenario_and_an_interrupted_run(tmp_path: Path) -> None:
    result = ScenarioResult(SCENARIOS[0], Outcome.ERROR, None, 0.1, (), "the harness raised X")
    finished = RunFinished((result,), Summary.of([result]), 0.2, "interrupted")
    events: list[Event] = [
        ScenarioErrored(SCENARIOS[0], 1, 3, "the harness raised X"),
        ScenarioFinished(result, 1, 3),
        RunInterrupted("interrupted", 1, 3),
        finished,
    ]
    stream = io.StringIO()
    json_path, junit_path = tmp_path / "r.json", tmp_path / "r.xml"
    reporters: list[Reporter] = [
        ConsoleReporter(stream, colour=False),
        JsonReporter(json_path),
        JUnitReporter(junit_path),
    ]
    for event in events:
        for reporter in reporters:
            reporter.handle(event)
    text = stream.getvalue()
    assert "run stopped: interrupted (1 of 3 scenarios finished)" in text
    assert "the harness raised X" in text
    document = json.loads(json_path.read_text(encoding="utf-8"))
    assert document["interrupted"] == "interrupted"
    assert document["scenarios"][0]["reason"] == "the harness raised X"
    suite = ET.parse(junit_path).getroot().find("testsuite")
    assert suite is not None
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["interrupted"] == "interrupted"
    error = suite.find("testcase/error")
    assert error is not None
    assert error.get("message") == "the harness raised X"
