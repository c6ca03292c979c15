"""The engine: runs selected scenarios through a harness and yields events, nothing else.

It knows no output format: reporters consume the events it yields (schemathesis' split between
an engine that emits and reporters that only consume). It keeps one promise whatever happens:
every run ends with :class:`~conformance.events.RunFinished`.

- A harness that raises (instead of returning an ``error`` verdict itself) yields
  :class:`~conformance.events.ScenarioErrored`; the scenario finishes as an ``error`` with the
  reason and the run goes on.
- An interrupt (Ctrl-C, a cancelled task) yields :class:`~conformance.events.RunInterrupted` and
  then ``RunFinished`` with what had finished; the interrupt is re-raised once the consumer asks
  for the next event, so the caller still stops.
- ``max_time`` bounds the whole run: the scenario running when it expires errors (its harness is
  cancelled), the rest are not run, and the run ends as interrupted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol

from conformance.events import (
    Event,
    RunFinished,
    RunInterrupted,
    RunStarted,
    ScenarioErrored,
    ScenarioFinished,
    ScenarioStarted,
)
from conformance.interrupts import is_interrupt
from conformance.model import Scenario
from conformance.results import Outcome, ScenarioResult, Summary

__all__ = ["ScenarioHarness", "execute"]


class ScenarioHarness(Protocol):
    """Anything that turns one scenario into one verdict."""

    async def run(self, scenario: Scenario) -> ScenarioResult: ...


class _OutOfTime(Exception):
    """The run's ``max_time`` ran out during a scenario."""


async def execute(
    scenarios: Sequence[Scenario],
    harness: ScenarioHarness,
    *,
    target: str,
    scheme: str,
    probe: bool,
    seed: int,
    max_time: float | None = None,
    options: Mapping[str, Any] | None = None,
) -> AsyncIterator[Event]:
    """Run ``scenarios`` in order and yield the run's events as they happen (``options``: what
    the run was told, for the reports; never a secret)."""
    started = time.perf_counter()
    deadline = None if max_time is None else time.monotonic() + max_time
    total = len(scenarios)
    yield RunStarted(target, scheme, tuple(scenarios), probe, seed, dict(options or {}))
    results: list[ScenarioResult] = []
    interrupted = ""
    pending: BaseException | None = None
    for index, scenario in enumerate(scenarios, start=1):
        if deadline is not None and time.monotonic() >= deadline:
            interrupted = _out_of_time(max_time)
            break
        yield ScenarioStarted(scenario, index, total)
        began = time.perf_counter()
        try:
            result = await _run_one(harness, scenario, deadline)
        except (KeyboardInterrupt, asyncio.CancelledError) as stop:
            interrupted = "interrupted" if is_interrupt(stop) else "cancelled"
            pending = stop
            break
        except _OutOfTime:
            reason = _out_of_time(max_time)
            yield ScenarioErrored(scenario, index, total, reason)
            result = _errored(scenario, reason, time.perf_counter() - began)
            interrupted = reason
        except Exception as error:  # the promise: a raising harness is an error, never a crash
            reason = f"the harness raised {error.__class__.__name__}: {error}"
            yield ScenarioErrored(scenario, index, total, reason)
            result = _errored(scenario, reason, time.perf_counter() - began)
        results.append(result)
        yield ScenarioFinished(result, index, total)
        if interrupted:
            break
    duration = time.perf_counter() - started
    if interrupted:
        yield RunInterrupted(interrupted, len(results), total)
    yield RunFinished(tuple(results), Summary.of(results), duration, interrupted)
    if pending is not None:
        raise pending


async def _run_one(
    harness: ScenarioHarness, scenario: Scenario, deadline: float | None
) -> ScenarioResult:
    if deadline is None:
        return await harness.run(scenario)
    loop_deadline = asyncio.get_running_loop().time() + (deadline - time.monotonic())
    budget = asyncio.timeout_at(loop_deadline)
    try:
        async with budget:
            return await harness.run(scenario)
    except TimeoutError:
        if budget.expired():
            raise _OutOfTime from None
        raise


def _out_of_time(max_time: float | None) -> str:
    return f"the run's time budget (max_time {max_time:g} s) ran out"


def _errored(scenario: Scenario, reason: str, duration_s: float) -> ScenarioResult:
    return ScenarioResult(scenario, Outcome.ERROR, None, duration_s, (), reason)
