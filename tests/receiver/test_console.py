"""The terminal console every command writes through: colour only where it belongs (never with
NO_COLOR or into a pipe), tables without trailing spaces, and nothing wider than the terminal."""

from __future__ import annotations

import io
import re

import pytest
from rich.text import Text

from receiver.commands.console import make_console, print_table, table_lines

ESCAPE = "\x1b"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
ID = "del_" + "0123456789abcdef" * 2
HEADERS = ("DELIVERY", "BUSINESS KEY", "REASON", "ATTEMPTS", "DEADLINE", "LAST OUTCOME")
ROWS = [
    (ID, "ren_18427", "deadline_exhausted", "3/8", "2026-08-13T10:00:00.000000Z", "HTTP 503 retry"),
    (
        ID[:-1] + "1",
        "-",
        "permanent_response",
        "1/8",
        "2026-08-13T11:00:00.000000Z",
        "(no attempt)",
    ),
]


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _write_everything(stream: io.StringIO) -> str:
    console = make_console(stream)
    console.print(Text("FAILED ", style="red"), Text("bold words", style="bold"))
    console.print("a plain line " * 12)
    print_table(console, HEADERS, ROWS)
    return stream.getvalue()


@pytest.fixture
def colour_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "80")


@pytest.mark.usefixtures("colour_terminal")
def test_a_terminal_gets_colour_unless_no_color_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ESCAPE in _write_everything(Terminal())
    monkeypatch.setenv("NO_COLOR", "1")
    out = _write_everything(Terminal())
    assert ESCAPE not in out
    assert "FAILED  bold words" in out


@pytest.mark.usefixtures("colour_terminal")
def test_a_pipe_gets_no_escape_codes_and_unwrapped_lines() -> None:
    out = _write_everything(io.StringIO())
    assert ESCAPE not in out
    lines = out.splitlines()
    assert ("a plain line " * 12).rstrip() in [line.rstrip() for line in lines]
    rows = [line for line in lines if line.startswith("del_")]
    assert [row.split()[0] for row in rows] == [ID, ID[:-1] + "1"]
    assert rows[0].endswith("HTTP 503 retry")
    assert rows[1].endswith("(no attempt)")


@pytest.mark.usefixtures("colour_terminal")
@pytest.mark.parametrize("no_color", ["", "1"])
def test_terminal_output_fits_80_columns(monkeypatch: pytest.MonkeyPatch, no_color: str) -> None:
    monkeypatch.setenv("NO_COLOR", no_color)
    out = _write_everything(Terminal())
    widths = [len(ANSI.sub("", line)) for line in out.splitlines()]
    assert max(widths) <= 80
    assert max(widths) > 60  # the table did need the room
    assert ID in ANSI.sub("", out)  # the id column never breaks


def test_colour_can_be_forced_or_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    forced = io.StringIO()
    make_console(forced, colour=True).print(Text("x", style="red"))
    assert ESCAPE in forced.getvalue()
    monkeypatch.delenv("NO_COLOR")
    refused = Terminal()
    make_console(refused, colour=False).print(Text("x", style="red"))
    assert refused.getvalue() == "x\n"


def test_table_lines_are_plain_two_spaces_apart_without_trailing_spaces() -> None:
    lines = table_lines(
        ("ID", "STATE", "N"), [("a", "delivered", "10"), ("bbb", "-", "2")], right=[2]
    )
    assert lines == [
        "ID   STATE       N",
        "a    delivered  10",
        "bbb  -           2",
    ]
