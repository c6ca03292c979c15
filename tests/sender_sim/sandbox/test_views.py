"""The dashboard's page data without a server: the chart's geometry, the time left, the tones."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from sender_sim.records import Attempt, DeadLetterReason, Delivery, OutcomeKind, State
from sender_sim.sandbox.chart import HEIGHT, attempts_chart, tone
from sender_sim.sandbox.views import time_left

T0 = datetime(2026, 8, 13, 9, tzinfo=UTC)


def _attempt(seconds: int, classification: str, status: int | None = 200) -> Attempt:
    at = T0 + timedelta(seconds=seconds)
    kind = OutcomeKind.RESPONSE if status is not None else OutcomeKind.TIMEOUT
    return Attempt("del_1", 1, "w", 1, at, at, kind, classification, status)


def test_the_chart_stacks_attempts_by_classification_over_time() -> None:
    attempts = [
        _attempt(0, "success"),
        _attempt(0, "server_error", 503),
        _attempt(0, "server_error", 503),
        _attempt(600, "timeout", None),
    ]
    chart = attempts_chart(attempts, now=T0 + timedelta(seconds=600))
    assert chart.total == 4
    assert [(label, count) for label, _, count in chart.legend] == [
        ("server_error", 2),
        ("success", 1),
        ("timeout", 1),
    ]
    first = [b for b in chart.bars if b.x == chart.bars[0].x]
    assert len(first) == 2  # two classifications stacked in the first slice
    # the tallest slice fills the plot, from the baseline up to the top padding
    assert sum(b.height for b in first) == pytest.approx(chart.baseline - 8, abs=0.02)
    assert all(b.y >= 0 and b.y + b.height <= HEIGHT for b in chart.bars)
    assert chart.bars[-1].x > chart.bars[0].x  # the timeout is later
    assert "1 timeout at +" in chart.bars[-1].title
    assert attempts_chart([], now=T0).bars == ()


def test_tones_say_what_a_classification_means() -> None:
    assert [tone(c) for c in ("success", "server_error", "timeout", "gone", "authentication")] == [
        "ok",
        "warn",
        "transport",
        "bad",
        "bad",
    ]


def _delivery(deadline: datetime) -> Delivery:
    return Delivery(
        "del_1", "evt_1", "app", "http://x", "d", None, State.SCHEDULED, deadline, 0, 8, T0, T0,
        T0, T0,
    )  # fmt: skip


def test_time_left_is_to_the_second_and_says_when_it_passed() -> None:
    assert time_left(_delivery(T0 + timedelta(hours=2, microseconds=400_000)), T0) == "2h"
    assert time_left(_delivery(T0 + timedelta(seconds=30.5)), T0) == "30.5s"
    assert time_left(_delivery(T0 - timedelta(minutes=5)), T0) == "passed 5m ago"


def test_time_left_says_what_the_deadline_meant_to_a_delivery_that_is_over() -> None:
    soon = _delivery(T0 + timedelta(seconds=31))
    exhausted = replace(soon, state=State.DEAD_LETTER, reason=DeadLetterReason.DEADLINE_EXHAUSTED)
    assert time_left(exhausted, T0) == "31s: too little for another attempt to end in time"
    gone = replace(soon, state=State.DEAD_LETTER, reason=DeadLetterReason.PERMANENT_RESPONSE)
    assert time_left(gone, T0) == "31s (dead-lettered: a redrive sets a new one)"
    delivered = replace(soon, state=State.DELIVERED)
    assert time_left(delivered, T0) == "31s (delivered: it no longer counts)"
    assert time_left(replace(delivered, deadline_at=T0 - timedelta(minutes=2)), T0) == (
        "passed 2m ago"
    )
