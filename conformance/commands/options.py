"""The options the conformance commands share, each declared once: ``--select`` and
``--deselect`` (which scenarios run), ``--json``, ``--junit`` and ``--ndjson`` (the report
files), for ``check``, ``check-sender`` and ``demo``, and ``--header`` for ``check`` and
``replay``.

Options every package's commands share (``--secret``, ``--seed``, ``--max-time`` …) are in
:mod:`receiver.commands.options`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from conformance.exceptions import UsageError
from conformance.extra_headers import parse_header

__all__ = ["deselect_option", "header_option", "report_file_options", "select_option"]

F = TypeVar("F", bound=Callable[..., Any])


def select_option() -> Callable[[F], F]:
    """``--select``: the scenarios to run (repeatable)."""
    return click.option(
        "--select", multiple=True, help="Scenario id, glob, family, tag or severity."
    )


def deselect_option() -> Callable[[F], F]:
    """``--deselect``: scenarios to leave out (repeatable)."""
    return click.option(
        "--deselect", multiple=True, help="Exclude an id, glob, family, tag or severity."
    )


class _Header(click.ParamType[tuple[str, str]]):
    """One ``Name: value`` header; in ``$HOOKPROOF_HEADERS``, one per line (a value may hold
    spaces, so the variable is not split on them)."""

    name = "header"
    envvar_list_splitter = "\n"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, str]:
        if isinstance(value, tuple):
            return value  # already converted (a default)
        try:
            return parse_header(str(value), "the header")
        except UsageError as error:
            self.fail(str(error), param, ctx)

    def split_envvar_value(self, rv: str) -> Sequence[str]:
        return [line for line in rv.splitlines() if line.strip()]


def header_option() -> Callable[[F], F]:
    """``-H/--header 'Name: value'`` (repeatable; env ``HOOKPROOF_HEADERS``, one per line;
    parameter ``headers``): extra headers on every webhook (:mod:`conformance.extra_headers`)."""
    return click.option(
        "-H",
        "--header",
        "headers",
        multiple=True,
        type=_Header(),
        envvar="HOOKPROOF_HEADERS",
        metavar="'NAME: VALUE'",
        help="Send this header with every webhook too (an API gateway's key, another "
        "X-GitHub-Event …); repeatable. Env: HOOKPROOF_HEADERS, one per line. Credential-like "
        "values are redacted in reports.",
    )


def report_file_options(*, ndjson: bool = True) -> Callable[[F], F]:
    """``--json FILE`` and ``--junit FILE`` (parameters ``json_path``, ``junit_path``) and, with
    ``ndjson``, ``--ndjson FILE`` (``ndjson_path``)."""
    options = [
        click.option(
            "--json", "json_path", default=None, metavar="FILE", help="Write a JSON report."
        ),
        click.option(
            "--junit", "junit_path", default=None, metavar="FILE", help="Write JUnit XML."
        ),
    ]
    if ndjson:
        options.append(
            click.option(
                "--ndjson",
                "ndjson_path",
                default=None,
                metavar="FILE",
                help="Write the run's events as they happen, one JSON object per line.",
            )
        )

    def apply(command: F) -> F:
        for option in reversed(options):  # listed in --help in the order above
            command = option(command)
        return command

    return apply
