"""Probe readings taken again for effects that show after the answer (``--settle``): scripted
probe answers, each reading counted; the waits are the module's own (real time, bounded by the
small ``settle_s`` each test gives)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from conformance.harnesses.settling import EffectLag, settled_reading, shown_after
from conformance.probe import ProbeSnapshot


def _probe(
    *answers: tuple[str | None, int],
) -> tuple[Callable[[], Awaitable[ProbeSnapshot]], list[int]]:
    """A probe that gives ``answers`` in turn (the last one repeats), and the readings made."""
    made: list[int] = []

    async def read() -> ProbeSnapshot:
        status, effects = answers[min(len(made), len(answers) - 1)]
        made.append(effects)
        return ProbeSnapshot("evt_1", status, effects, 1)

    return read, made


def _settled(read: Callable[[], Awaitable[ProbeSnapshot]], **kwargs: object) -> ProbeSnapshot:
    arguments: dict[str, object] = {
        "at_least": 1,
        "confirm": False,
        "settle_s": 0.5,
        "lag": EffectLag(),
        "remarks": {},
    }
    arguments.update(kwargs)
    return asyncio.run(settled_reading(read, **arguments))  # type: ignore[arg-type]


def test_without_settle_one_reading_is_the_verdict() -> None:
    read, made = _probe(("committed", 0), ("committed", 1))
    assert _settled(read, settle_s=0).effects == 0
    assert made == [0]


@pytest.mark.parametrize("status", [None, "in_flight"])
def test_an_event_not_yet_stored_is_never_waited_for(status: str | None) -> None:
    read, made = _probe((status, 0), ("committed", 1))
    assert _settled(read).status == status
    assert len(made) == 1


def test_a_committed_event_is_read_until_its_effect_shows_and_the_run_learns_the_lag() -> None:
    read, made = _probe(("committed", 0), ("committed", 0), ("committed", 1))
    lag, remarks = EffectLag(), dict[str, str]()
    snapshot = _settled(read, lag=lag, remarks=remarks)
    assert snapshot.effects == 1
    assert made == [0, 0, 1]
    assert lag.longest_s > 0
    assert "after its event was committed" in remarks["settled"]


def test_an_effect_that_never_shows_is_judged_as_read_after_settle() -> None:
    read, made = _probe(("committed", 0))
    snapshot = _settled(read, settle_s=0.2)
    assert snapshot.effects == 0
    assert 3 <= len(made) <= 12  # backing off from 5 ms to 100 ms, within 0.2 s


def test_once_effects_lag_a_reading_that_must_not_see_more_is_confirmed_later() -> None:
    lag = EffectLag()
    lag.saw(0.01)
    read, made = _probe(("committed", 1), ("committed", 2))  # a duplicate's effect, late
    remarks: dict[str, str] = {}
    assert _settled(read, confirm=True, lag=lag, remarks=remarks).effects == 2
    assert made == [1, 2]
    assert "late second effect" in remarks["confirmed"]


def test_under_settle_a_reading_is_confirmed_though_the_run_saw_no_lag() -> None:
    """A busy machine may read the probe only after the queue's next poll, so the run never
    sees a lag; the queue's second effect must still be seen."""
    read, made = _probe(("committed", 1), ("committed", 2))
    remarks: dict[str, str] = {}
    assert _settled(read, confirm=True, remarks=remarks).effects == 2
    assert made == [1, 2]
    assert "100 ms later" in remarks["confirmed"]


def test_without_settle_a_reading_is_never_confirmed() -> None:
    read, made = _probe(("committed", 1), ("committed", 2))
    assert _settled(read, confirm=True, settle_s=0).effects == 1
    assert made == [1]


def test_shown_after_says_how_late_an_effect_showed_or_that_it_did_not() -> None:
    late, _ = _probe(("committed", 0), ("committed", 1))
    seconds = asyncio.run(shown_after(late, at_least=1, lag=EffectLag(), within_s=0.5))
    assert seconds is not None
    assert 0 < seconds < 0.5
    never, _ = _probe(("committed", 0))
    assert asyncio.run(shown_after(never, at_least=1, lag=EffectLag(), within_s=0.05)) is None
