"""One duration grammar for every command, config and policy file (receiver.durations)."""

from __future__ import annotations

import re
from datetime import timedelta

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from receiver.durations import (
    DURATION,
    POSITIVE_DURATION,
    parse_duration,
    parse_seconds,
    seconds_of,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90", timedelta(seconds=90)),
        ("1.5", timedelta(seconds=1.5)),
        ("250ms", timedelta(milliseconds=250)),
        ("1.5s", timedelta(seconds=1.5)),
        ("10m", timedelta(minutes=10)),
        ("1.5h", timedelta(minutes=90)),
        ("1d", timedelta(days=1)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("2m0.5s", timedelta(minutes=2, milliseconds=500)),
        ("1s250ms", timedelta(seconds=1, milliseconds=250)),
        ("0.000001s", timedelta(microseconds=1)),
        ("  30s ", timedelta(seconds=30)),
    ],
)
def test_durations_as_people_write_them(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "soon", "s", "5 days", "1h 30m", "30m1h", "1m1m", "1.5h30m", "1e3s", "-", "+5m", "-5m"],
)
def test_anything_else_is_refused_saying_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match=r"not a duration \(e\.g\. 30s"):
        parse_duration(text)


def test_finer_than_a_microsecond_or_too_long_is_refused() -> None:
    with pytest.raises(ValueError, match="finer than a microsecond"):
        parse_duration("0.0000001s")
    with pytest.raises(ValueError, match="too long"):
        parse_duration("99999999999d")


def test_offsets_may_be_signed_and_need_a_unit_where_a_bare_number_is_ambiguous() -> None:
    assert parse_duration("-5m", signed=True) == timedelta(minutes=-5)
    assert parse_duration("+2h", signed=True) == timedelta(hours=2)
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("5", bare_seconds=False)


@given(
    st.integers(0, 400),
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 59),
    st.integers(0, 999_999),
)
def test_every_compound_reads_back_exactly(d: int, h: int, m: int, s: int, us: int) -> None:
    text = f"{d}d{h}h{m}m{s}.{us:06d}s"
    expected = timedelta(days=d, hours=h, minutes=m, seconds=s, microseconds=us)
    assert parse_duration(text) == expected
    assert parse_seconds(text) == expected.total_seconds()


@click.command()
@click.option("--patience", type=DURATION)
@click.option("--timeout", type=POSITIVE_DURATION)
def _command(patience: float | None, timeout: float | None) -> None:
    click.echo(f"{patience} {timeout}")


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["--patience", "0", "--timeout", "250ms"], "0.0 0.25"),
        (["--patience", "2m", "--timeout", "5"], "120.0 5.0"),
    ],
)
def test_the_click_types_give_seconds(args: list[str], shown: str) -> None:
    result = CliRunner().invoke(_command, args)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == shown


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--timeout", "0s"], "must be more than 0"),
        (["--patience", "soon"], "not a duration"),
        (["--timeout", "-1"], "not a duration"),
    ],
)
def test_the_click_types_refuse_with_a_usage_error(args: list[str], message: str) -> None:
    result = CliRunner().invoke(_command, args)
    assert result.exit_code == 2
    assert message in result.output


@pytest.mark.parametrize(
    ("value", "seconds"), [(90, 90.0), (0, 0.0), (2.5, 2.5), ("1m30s", 90.0), ("0.25", 0.25)]
)
def test_a_config_value_of_seconds_is_a_number_or_a_duration(value: object, seconds: float) -> None:
    assert seconds_of(value) == seconds


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (float("inf"), "inf is not a finite number of seconds"),  # TOML writes inf and nan
        (float("nan"), "nan is not a finite number of seconds"),
        (-1, "-1 must not be negative"),
        (1e300, "1e+300 is too long a duration"),
        (10**400, "is too long a duration"),
        (True, "True is not seconds nor a duration"),
        ([30], "[30] is not seconds nor a duration"),
        ("soon", "'soon' is not a duration"),
    ],
)
def test_a_wait_that_would_never_end_is_not_seconds(value: object, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        seconds_of(value)
