"""The terminal every ``hookproof`` command writes to: one :class:`rich.console.Console` per
command, plain tables and styled words, the same everywhere.

- :func:`make_console` builds a command's console. It writes to ``sys.stdout`` (or ``stderr``) as
  they are at the time of writing, so redirections and test captures see the output.
- **Colour degrades cleanly.** ``NO_COLOR`` (any non-empty value, https://no-color.org),
  ``TERM=dumb`` or output that is not a terminal give plain text without a single escape code;
  ``colour=True`` forces colour (a report piped into ``less -R``).
- **Width-safe.** On a terminal, lines and tables are wrapped to its width (at spaces; a table's
  first column, the id, never breaks). To a pipe or a file nothing is wrapped or padded: every
  line and every table row stays one line, so ``grep`` and ``awk`` work on it. Text that must
  survive copy and paste (a ``curl`` reproduction) is printed with ``soft_wrap=True``.
- Machine output (``--json``, Markdown) is data, not terminal text: commands write it verbatim
  with ``click.echo``, never through the console.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Literal, TextIO

from rich.console import Console
from rich.style import Style
from rich.table import Table
from rich.text import Text

__all__ = ["Cell", "make_console", "print_table", "table_lines", "table_text"]

Cell = str | Text
"""A table cell: plain text (never read as markup) or already styled text."""

_NATURAL = 10_000
"""The width a table is laid out in when nothing limits it (every row on one line)."""


def _no_colour() -> bool:
    return bool(os.environ.get("NO_COLOR")) or os.environ.get("TERM") == "dumb"


def make_console(
    file: TextIO | None = None, *, stderr: bool = False, colour: bool | None = None
) -> Console:
    """A command's console on ``file`` (default: the current stdout, or stderr with ``stderr``).

    ``colour``: ``None`` colours only a terminal without ``NO_COLOR``; ``False`` never; ``True``
    always (escape codes even into a file).
    """
    plain = colour is False or (colour is None and _no_colour())
    console = Console(
        file=file,
        stderr=stderr,
        force_terminal=True if colour else None,
        color_system=None if plain else "auto",
        no_color=plain,
        highlight=False,
        markup=False,
        emoji=False,
    )
    console.soft_wrap = not console.is_terminal
    return console


def _table(headers: Sequence[str], rows: Sequence[Sequence[Cell]], right: Sequence[int]) -> Table:
    table = Table(
        box=None,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1),
        header_style=Style(bold=True),
        show_header=True,
    )
    for index, header in enumerate(headers):
        justify: Literal["left", "right"] = "right" if index in right else "left"
        table.add_column(header, justify=justify, no_wrap=index == 0)
    for row in rows:
        table.add_row(*(Text(cell) if isinstance(cell, str) else cell for cell in row))
    return table


def table_text(
    console: Console,
    headers: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    *,
    right: Sequence[int] = (),
) -> list[Text]:
    """The table as styled lines without trailing spaces: columns two spaces apart, bold headers,
    the columns numbered in ``right`` right-aligned. Width: see the module docstring."""
    table = _table(headers, rows, right)
    width = console.width if console.is_terminal else _NATURAL
    lines = console.render_lines(table, console.options.update(width=width), pad=False)
    out: list[Text] = []
    for line in lines:
        text = Text(end="")
        for segment in line:
            if not segment.control:
                text.append(segment.text, segment.style)
        text.rstrip()
        out.append(text)
    return out


_PLAIN = Console(color_system=None, no_color=True, highlight=False, markup=False, emoji=False)


def table_lines(
    headers: Sequence[str], rows: Sequence[Sequence[Cell]], *, right: Sequence[int] = ()
) -> list[str]:
    """The table as plain lines, every row on one line (for writers that take strings)."""
    return [text.plain for text in table_text(_PLAIN, headers, rows, right=right)]


def print_table(
    console: Console,
    headers: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    *,
    right: Sequence[int] = (),
) -> None:
    """Print the table on ``console`` (see :func:`table_text`)."""
    for text in table_text(console, headers, rows, right=right):
        console.print(text)
