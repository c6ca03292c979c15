"""The metrics page's one chart, as geometry: attempts over time, stacked by classification.

:func:`attempts_chart` buckets attempts by their start time into equal slices between the first
and the last (or ``now``) and stacks one rectangle per classification in each slice; the
template draws the rectangles as server-rendered SVG (no script, no library). Each
classification gets a tone by what it means: delivered, retried, dead-lettered or transport.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sender_sim.records import Attempt, OutcomeKind, format_duration

__all__ = ["Bar", "Chart", "attempts_chart", "tone"]

WIDTH = 960
HEIGHT = 200
_PAD_LEFT = 36
_PAD_BOTTOM = 22
_PAD_TOP = 8
_RETRIED = frozenset({"server_error", "rate_limited", "client_error", "unexpected_status"})
_TRANSPORT = frozenset(k.value for k in OutcomeKind if k is not OutcomeKind.RESPONSE)


def tone(classification: str) -> str:
    """The CSS tone of a classification: ``ok``, ``warn``, ``transport`` or ``bad``."""
    if classification == "success":
        return "ok"
    if classification in _TRANSPORT:
        return "transport"
    if classification in _RETRIED:
        return "warn"
    return "bad"


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    css: str
    title: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    bars: tuple[Bar, ...]
    legend: tuple[tuple[str, str, int], ...]
    """(classification, css class, attempts)."""
    x_labels: tuple[tuple[float, str], ...]
    y_labels: tuple[tuple[float, str], ...]
    baseline: float
    left: float
    total: int


def attempts_chart(attempts: Sequence[Attempt], *, now: datetime, buckets: int = 24) -> Chart:
    """The chart of ``attempts`` (empty: ``total`` 0, no bars)."""
    classes = sorted({a.classification for a in attempts})
    css = {c: f"fill-{tone(c)} series-{i % 6}" for i, c in enumerate(classes)}
    counts = Counter(a.classification for a in attempts)
    legend = tuple((c, css[c], counts[c]) for c in classes)
    baseline = HEIGHT - _PAD_BOTTOM
    if not attempts:
        return Chart(WIDTH, HEIGHT, (), legend, (), (), baseline, _PAD_LEFT, 0)
    start = min(a.started_at for a in attempts)
    end = max(max(a.started_at for a in attempts), min(now, start + timedelta(days=365)))
    span = max(end - start, timedelta(seconds=1))
    step = timedelta(seconds=max(1, math.ceil(span.total_seconds() / buckets)))
    slots: list[Counter[str]] = [Counter() for _ in range(buckets)]
    for a in attempts:
        index = min(int((a.started_at - start) / step), buckets - 1)
        slots[index][a.classification] += 1
    peak = max(sum(s.values()) for s in slots) or 1
    plot_w = WIDTH - _PAD_LEFT - 4
    plot_h = baseline - _PAD_TOP
    slot_w = plot_w / buckets
    bars: list[Bar] = []
    for i, slot in enumerate(slots):
        y = float(baseline)
        for c in classes:
            n = slot[c]
            if not n:
                continue
            h = plot_h * n / peak
            y -= h
            when = format_duration(step * i)
            bars.append(
                Bar(
                    round(_PAD_LEFT + i * slot_w + 1, 2),
                    round(y, 2),
                    round(max(slot_w - 2, 1), 2),
                    round(h, 2),
                    css[c],
                    f"{n} {c} at +{when}",
                )
            )
    x_labels = tuple(
        (round(_PAD_LEFT + i * slot_w, 2), "+" + format_duration(step * i))
        for i in range(0, buckets, 6)
    )
    y_labels = ((float(_PAD_TOP), str(peak)), (float(baseline), "0"))
    return Chart(
        WIDTH, HEIGHT, tuple(bars), legend, x_labels, y_labels, baseline, _PAD_LEFT, len(attempts)
    )
