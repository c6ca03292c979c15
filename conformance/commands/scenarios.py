"""``hookproof scenarios``: the scenario catalogue as a table, as JSON or as docs/scenarios.md."""

from __future__ import annotations

import json
from collections.abc import Sequence

import click

from conformance.catalogue import CATALOGUE
from conformance.commands.options import select_option
from conformance.docs import catalogue_markdown, scenario_records
from conformance.exceptions import UsageError
from conformance.model import Harness
from conformance.reporters.text import counted
from receiver.commands.console import make_console, print_table

__all__ = ["scenarios_command"]


@click.command("scenarios")
@click.option("--json", "as_json", is_flag=True, help="Print the catalogue as JSON.")
@click.option("--markdown", is_flag=True, help="Print docs/scenarios.md.")
@select_option()
def scenarios_command(as_json: bool, markdown: bool, select: Sequence[str]) -> int:
    """List the scenario catalogue."""
    if as_json and markdown:
        raise UsageError("choose one of --json and --markdown")
    chosen = CATALOGUE.select(tuple(select))
    if markdown:
        click.echo(catalogue_markdown(chosen), nl=False)
    elif as_json:
        click.echo(json.dumps(scenario_records(chosen), indent=2))
    else:
        out = make_console()
        rows = [
            (
                scenario.id,
                scenario.severity.value,
                "".join(t.value for t in Harness if t in scenario.tags),
                scenario.title,
            )
            for scenario in chosen
        ]
        print_table(out, ("id", "severity", "tags", "title"), rows)
        out.print()
        out.print(counted(len(chosen), "scenario"))
    return 0
