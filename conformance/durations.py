"""Durations as people write them on a command line: ``90``, ``1.5s``, ``250ms``, ``10m``,
``2h`` — parsed to seconds, with a click parameter type (``--patience``)."""

from __future__ import annotations

import re

import click

__all__ = ["DURATION", "parse_duration"]

_UNITS = {"": 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>ms|s|m|h|)\s*$")


def parse_duration(text: str) -> float:
    """Seconds in ``text`` (a number, optionally followed by ms, s, m or h); ``ValueError``
    otherwise."""
    found = _DURATION.match(text)
    if found is None:
        raise ValueError(f"{text!r} is not a duration (e.g. 30s, 250ms, 10m, 2h)")
    return float(found["number"]) * _UNITS[found["unit"]]


class _Duration(click.ParamType[float]):
    name = "DURATION"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, int | float):
            return float(value)
        try:
            return parse_duration(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


DURATION = _Duration()
"""The click type of a duration option: its value is seconds (a float)."""
