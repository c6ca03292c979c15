"""Effects that show after the answer: reading the probe again for them (``--settle``).

By the probe contract ``committed`` means the event's effect is durably recorded, so by default a
2xx whose event shows no effect yet is a 2xx before the commit (``must``): a receiver that
answers and then applies the effect in a ``setTimeout`` or a background thread loses it when the
process dies. A receiver built the way Stripe's and Svix's documentation recommends stores the
event together with a job in a durable queue, answers, and applies the effect afterwards; from
outside it looks the same. A platform whose partners work that way says so with ``--settle``:
a reading that expects effects on a **committed** event is then taken again, backing off, for up
to that long until they show (an event the probe does not know, or knows only as ``in_flight``,
is never waited for). Without it, a failed reading is still followed once, to say in the report
whether the effect showed later (:func:`shown_after`).

A second effect (a duplicate the queue applies too) lags as the first did, so under ``--settle``
a reading that must not see more than it expects is taken once more, three times the longest lag
the run has seen later (at least 100 ms, at most the settle time). The run learns that lag from
one lone event before the scenarios and from every reading after, but it does not wait for having
seen one: a busy machine that reads the probe only after the queue's next poll sees no lag at
all, and a duplicate applied a moment later must still fail. Without ``--settle`` nothing waits.
:class:`EffectLag` is the run's memory of the lag, shared by its scenarios as the rate limiter
is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from conformance.probe import ProbeSnapshot

__all__ = ["DIAGNOSES_UNSHOWN", "DIAGNOSIS_S", "EffectLag", "settled_reading", "shown_after"]

FIRST_PAUSE_S = 0.005
"""The first pause before reading a committed event's probe again; each pause doubles."""
LONGEST_PAUSE_S = 0.1
DIAGNOSIS_S = 1.0
"""How long a failed reading is followed to say whether its effect showed later."""
DIAGNOSES_UNSHOWN = 2
"""After this many followed failures whose effect never showed, the run stops following them: the
receiver loses effects, it does not apply them late (each following costs ``DIAGNOSIS_S``)."""
WATCH_LAGS = 3
"""The confirming reading waits this many times the run's longest lag …"""
SHORTEST_WATCH_S = 0.1
"""… and at least this long (a queue polled now and then lags by a varying part of its period)."""


class EffectLag:
    """The longest time, in this run, between a committed reading without its effect and the
    reading that showed it (``0``: every effect showed at once), and how many failed readings
    were followed in vain."""

    def __init__(self) -> None:
        self.longest_s = 0.0
        self.unshown = 0

    def saw(self, lag_s: float) -> None:
        self.longest_s = max(self.longest_s, lag_s)


async def settled_reading(
    read: Callable[[], Awaitable[ProbeSnapshot]],
    *,
    at_least: int,
    confirm: bool,
    settle_s: float,
    lag: EffectLag,
    remarks: dict[str, str],
) -> ProbeSnapshot:
    """The probe's reading of one event, taken again (real time, at most ``settle_s``) while it
    is committed with fewer than ``at_least`` effects; with ``confirm``, once more after three
    times the run's longest lag (at least ``SHORTEST_WATCH_S``). What waiting showed goes to
    ``remarks``, one sentence per kind (the scenario's result says them)."""
    snapshot = await read()
    if settle_s <= 0 or snapshot.status != "committed":
        return snapshot
    started = time.monotonic()
    deadline = started + settle_s
    pause = FIRST_PAUSE_S
    waited = False
    while snapshot.effects < at_least:
        left = deadline - time.monotonic()
        if left <= 0:
            return snapshot  # never showed: judged as read
        await asyncio.sleep(min(pause, left))  # real-time: an effect applied after the answer
        pause = min(pause * 2, LONGEST_PAUSE_S)
        snapshot = await read()
        waited = True
        if snapshot.status != "committed":
            return snapshot
    if waited:
        shown_after = time.monotonic() - started
        lag.saw(shown_after)
        remarks.setdefault(
            "settled",
            f"an effect showed {shown_after * 1000:.0f} ms after its event was committed "
            "(this receiver applies effects after answering; --settle)",
        )
    if confirm:
        watch = min(max(WATCH_LAGS * lag.longest_s, SHORTEST_WATCH_S), settle_s)
        await asyncio.sleep(watch)  # real-time: a second effect would lag as the first did
        snapshot = await read()
        remarks.setdefault(
            "confirmed",
            f"read the probe again {watch * 1000:.0f} ms later for a late second effect",
        )
    return snapshot


async def shown_after(
    read: Callable[[], Awaitable[ProbeSnapshot]],
    *,
    at_least: int,
    lag: EffectLag,
    within_s: float = DIAGNOSIS_S,
) -> float | None:
    """Seconds until a committed event shows ``at_least`` effects, reading the probe again for up
    to ``within_s`` (``None``: they did not show, or ``lag`` counts ``DIAGNOSES_UNSHOWN`` such
    followings already). Says what a failure was, never judges it."""
    if lag.unshown >= DIAGNOSES_UNSHOWN:
        return None
    started = time.monotonic()
    later = await settled_reading(
        read, at_least=at_least, confirm=False, settle_s=within_s, lag=EffectLag(), remarks={}
    )
    if later.status != "committed" or later.effects < at_least:
        lag.unshown += 1
        return None
    return time.monotonic() - started
