"""The engine: runs selected scenarios through a harness and yields events, nothing else.

It knows no output format: reporters consume the events it yields (schemathesis' split between
an engine that emits and reporters that only consume). A scenario that raises inside its harness
becomes an ``error`` outcome; the run always finishes with :class:`RunFinished`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from conformance.events import Event, RunFinished, RunStarted, ScenarioFinished, ScenarioStarted
from conformance.model import Scenario
from conformance.results import ScenarioResult, Summary

__all__ = ["ScenarioHarness", "execute"]


class ScenarioHarness(Protocol):
    """Anything that turns one scenario into one verdict."""

    async def run(self, scenario: Scenario) -> ScenarioResult: ...


async def execute(
    scenarios: Sequence[Scenario],
    harness: ScenarioHarness,
    *,
    target: str,
    scheme: str,
    probe: bool,
    seed: int,
) -> AsyncIterator[Event]:
    """Run ``scenarios`` in order and yield the run's events as they happen."""
    started = time.perf_counter()
    total = len(scenarios)
    yield RunStarted(target, scheme, tuple(scenarios), probe, seed)
    results: list[ScenarioResult] = []
    for index, scenario in enumerate(scenarios, start=1):
        yield ScenarioStarted(scenario, index, total)
        result = await harness.run(scenario)
        results.append(result)
        yield ScenarioFinished(result, index, total)
    yield RunFinished(tuple(results), Summary.of(results), time.perf_counter() - started)
