"""The engine's events: everything a reporter may know about a run, in the order it happens.

The engine yields these and nothing else; the console, JSON and JUnit reporters and the pytest
plugin only consume them (they never run a scenario or judge one). Every run ends with
:class:`RunFinished`: a scenario whose harness raised is announced by :class:`ScenarioErrored`
(and still finishes, as an ``error``); a run cut short (Ctrl-C, cancellation, ``max_time``) by
:class:`RunInterrupted`, after which :class:`RunFinished` carries what had finished.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from conformance.model import Scenario
from conformance.results import ScenarioResult, Summary

__all__ = [
    "Event",
    "RunFinished",
    "RunInterrupted",
    "RunStarted",
    "ScenarioErrored",
    "ScenarioFinished",
    "ScenarioStarted",
]


@dataclass(frozen=True)
class RunStarted:
    target: str
    scheme: str
    scenarios: tuple[Scenario, ...]
    probe: bool
    seed: int
    options: Mapping[str, Any] = field(default_factory=dict)
    """What the run was told (timeouts, selection, answers …; never a secret)."""


@dataclass(frozen=True)
class ScenarioStarted:
    scenario: Scenario
    index: int
    total: int


@dataclass(frozen=True)
class ScenarioErrored:
    """The harness raised instead of returning a verdict; the scenario errors with ``reason``
    (the :class:`ScenarioFinished` that follows carries it) and the run goes on."""

    scenario: Scenario
    index: int
    total: int
    reason: str


@dataclass(frozen=True)
class ScenarioFinished:
    result: ScenarioResult
    index: int
    total: int


@dataclass(frozen=True)
class RunInterrupted:
    """The run stopped before its last scenario: ``completed`` of ``total`` finished, and why
    (an interrupt, a cancellation, or the run's time budget running out)."""

    reason: str
    completed: int
    total: int


@dataclass(frozen=True)
class RunFinished:
    results: tuple[ScenarioResult, ...]
    summary: Summary
    duration_s: float
    interrupted: str = ""
    """Why the run stopped early (as in :class:`RunInterrupted`); empty when it ran to the end."""


Event = (
    RunStarted | ScenarioStarted | ScenarioErrored | ScenarioFinished | RunInterrupted | RunFinished
)
