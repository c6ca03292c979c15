"""The engine's events: everything a reporter may know about a run, in the order it happens.

The engine yields these and nothing else; the console, JSON and JUnit reporters and the pytest
plugin only consume them (they never run a scenario or judge one).
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.model import Scenario
from conformance.results import ScenarioResult, Summary

__all__ = ["Event", "RunFinished", "RunStarted", "ScenarioFinished", "ScenarioStarted"]


@dataclass(frozen=True)
class RunStarted:
    target: str
    scheme: str
    scenarios: tuple[Scenario, ...]
    probe: bool
    seed: int


@dataclass(frozen=True)
class ScenarioStarted:
    scenario: Scenario
    index: int
    total: int


@dataclass(frozen=True)
class ScenarioFinished:
    result: ScenarioResult
    index: int
    total: int


@dataclass(frozen=True)
class RunFinished:
    results: tuple[ScenarioResult, ...]
    summary: Summary
    duration_s: float


Event = RunStarted | ScenarioStarted | ScenarioFinished | RunFinished
