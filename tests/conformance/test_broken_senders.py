"""The S scenarios can fail: a sender simulator with one deliberate bug (patched in for the test)
fails the scenario that targets it, while every other S scenario keeps judging it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

import sender_sim.simulator
from conformance.catalogue import CATALOGUE
from conformance.harnesses.simulated import SenderHarness
from conformance.results import Outcome
from sender_sim import FixedSchedule, Policy


def _non_strict_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    def fits(self: Policy, start: datetime, deadline: datetime) -> bool:
        return start + self.budget <= deadline  # equality should dead-letter

    monkeypatch.setattr(Policy, "fits", fits)


def _ignores_clock_skew(monkeypatch: pytest.MonkeyPatch) -> None:
    def fits(self: Policy, start: datetime, deadline: datetime) -> bool:
        return start + self.expected_attempt_time < deadline  # no max_clock_skew margin

    monkeypatch.setattr(Policy, "fits", fits)


def _schedule_from_end(monkeypatch: pytest.MonkeyPatch) -> None:
    def next_at(
        self: FixedSchedule, made: int, scheduled_for: datetime, ended_at: datetime, rng: Any
    ) -> datetime:
        return ended_at + self.delay_before(made + 1)  # measured from when it ran

    monkeypatch.setattr(FixedSchedule, "next_at", next_at)


def _redrive_without_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sender_sim.simulator, "check_request", lambda *args: None)


def _no_jitter_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    from sender_sim import FullJitter

    def next_at(
        self: FullJitter, made: int, scheduled_for: datetime, ended_at: datetime, rng: Any
    ) -> datetime:
        return ended_at + self.base * (2**made) + timedelta(seconds=1)  # above the ceiling

    monkeypatch.setattr(FullJitter, "next_at", next_at)


BUGS: list[tuple[Callable[[pytest.MonkeyPatch], None], str]] = [
    (_non_strict_deadline, "deadline.retry-at"),
    (_ignores_clock_skew, "deadline.worker-clock-skew"),
    (_schedule_from_end, "schedules.fixed-from-scheduled"),
    (_redrive_without_checks, "redrive.missing-fields"),
    (_no_jitter_cap, "schedules.full-jitter-bounds"),
]


@pytest.mark.parametrize(("bug", "scenario_id"), BUGS, ids=[b[1] for b in BUGS])
def test_a_broken_sender_fails_the_scenario_that_targets_its_bug(
    monkeypatch: pytest.MonkeyPatch,
    bug: Callable[[pytest.MonkeyPatch], None],
    scenario_id: str,
) -> None:
    harness = SenderHarness(seed=5)
    scenario = CATALOGUE.get(scenario_id)
    assert asyncio.run(harness.run(scenario)).outcome is Outcome.PASSED
    bug(monkeypatch)
    result = asyncio.run(harness.run(scenario))
    assert result.outcome is not Outcome.PASSED
    if result.outcome is Outcome.FAILED:
        assert "Delivery dlv_" in result.failures[0].reproduce  # the explain story
