"""Durations as people write them, one grammar for every command, config and policy file.

``250ms``, ``1.5s``, ``90s``, ``10m``, ``2h``, ``1d`` and compounds in descending order
(``1h30m``, ``1d12h``, ``2m0.5s``); only the last part may have a fraction, and the total is
exact to the microsecond (``0.000001s``). Where seconds are expected a bare number is seconds
(``90``); where a duration is an offset (a deadline ``-5m`` or ``+2h``) it may carry a sign.

:func:`parse_duration` returns a :class:`~datetime.timedelta`; :data:`DURATION` and
:data:`POSITIVE_DURATION` are the click types of options in seconds (their value is a float).
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from decimal import Decimal

import click

__all__ = [
    "DURATION",
    "EXAMPLES",
    "POSITIVE_DURATION",
    "parse_duration",
    "parse_seconds",
    "seconds_of",
]

EXAMPLES = "e.g. 30s, 250ms, 10m, 2h, 1d or 1h30m"
_UNITS = ("d", "h", "m", "s", "ms")
_MICROSECONDS = {
    "d": 86_400_000_000,
    "h": 3_600_000_000,
    "m": 60_000_000,
    "s": 1_000_000,
    "ms": 1000,
}
_PART = re.compile(r"(\d+)(\.\d+)?(ms|d|h|m|s)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def parse_duration(text: str, *, bare_seconds: bool = True, signed: bool = False) -> timedelta:
    """The duration ``text`` says (see the module docstring); ``ValueError`` saying what is
    expected otherwise. ``bare_seconds``: a plain number is seconds; ``signed``: a leading
    ``+`` or ``-`` is allowed."""
    raw = text.strip()
    negative = False
    if signed and raw[:1] in ("+", "-"):
        negative, raw = raw[0] == "-", raw[1:]
    micros = _micros(raw, bare_seconds)
    if micros is None:
        raise ValueError(f"{text!r} is not a duration ({EXAMPLES})")
    if micros != micros.to_integral_value():
        raise ValueError(f"{text!r} is finer than a microsecond")
    try:
        duration = timedelta(microseconds=int(micros))
    except OverflowError:
        raise ValueError(f"{text!r} is too long a duration") from None
    return -duration if negative else duration


def parse_seconds(text: str) -> float:
    """Seconds in ``text`` (a bare number, or a duration), never negative."""
    return parse_duration(text).total_seconds()


def seconds_of(value: object) -> float:
    """Seconds from a value a config or policy file may hold for them: a number (finite, not
    negative, not longer than a :class:`~datetime.timedelta` holds) or a duration string
    (``"30s"``, ``"10m"``); ``ValueError`` saying what is expected otherwise. TOML writes
    ``inf`` and ``nan`` as numbers: a wait of either would never end, so neither is seconds."""
    if isinstance(value, str):
        return parse_seconds(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{value!r} is not seconds nor a duration ({EXAMPLES})")
    shown = repr(value) if len(repr(value)) <= 24 else repr(value)[:20] + "…"
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{shown} is not a finite number of seconds")
    if value < 0:
        raise ValueError(f"{shown} must not be negative")
    try:
        seconds = float(value)
        timedelta(seconds=seconds)
    except OverflowError:
        raise ValueError(f"{shown} is too long a duration") from None
    return seconds


def _micros(raw: str, bare_seconds: bool) -> Decimal | None:
    if bare_seconds and _NUMBER.fullmatch(raw):
        return Decimal(raw) * 1_000_000
    total, position, last = Decimal(0), 0, -1
    while position < len(raw):
        part = _PART.match(raw, position)
        if part is None:
            return None
        whole, fraction, unit = part.groups()
        rank = _UNITS.index(unit)
        position = part.end()
        if rank <= last or (fraction and position < len(raw)):
            return None  # units in descending order, a fraction only on the last part
        last = rank
        total += Decimal(whole + (fraction or "")) * _MICROSECONDS[unit]  # digits: exact
    return total if last >= 0 else None


class _Duration(click.ParamType[float]):
    """A duration option whose value is seconds (a float): never negative; ``positive``: more
    than zero."""

    name = "DURATION"

    def __init__(self, *, positive: bool) -> None:
        self.positive = positive

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            seconds = seconds_of(value if isinstance(value, int | float) else str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)
        if self.positive and seconds == 0:
            self.fail(f"{value!r} must be more than 0", param, ctx)
        return seconds


DURATION = _Duration(positive=False)
"""Seconds, at least 0 (``--patience``, ``--wait-for-endpoint``)."""
POSITIVE_DURATION = _Duration(positive=True)
"""Seconds, more than 0 (``--timeout``, ``--max-time``)."""
