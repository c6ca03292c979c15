"""``hookproof deliveries list|export``: the delivery monitor of the sender database.

Both take the same filters: ``--event-from/--event-to`` and ``--delivered-from/--delivered-to``
(RFC 3339, or a duration from the simulated now such as ``-2h``), ``--kind delivery|event``,
``--status``, ``--http-class``, ``--endpoint`` and ``--business-key``. ``list`` prints the rows
(or JSON); ``export --csv FILE`` writes them as CSV — at most 5000 rows: a larger selection is
refused with ``EXPORT_TOO_LARGE`` (exit status 2) and no file is written, never a partial one.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from receiver.commands.console import make_console, print_table
from receiver.commands.files import os_reason
from sender_sim.commands.options import db_option, json_option
from sender_sim.commands.support import open_store, parse_deadline, session_clock
from sender_sim.exceptions import StoreError
from sender_sim.inspection import (
    EXPORT_LIMIT,
    HTTP_CLASSES,
    STATUSES,
    RowFilter,
    RowKind,
    row_json,
)
from sender_sim.records import rfc3339
from sender_sim.simulator import Simulator

__all__ = ["deliveries_group"]

F = TypeVar("F", bound=Callable[..., Any])

_TIMES = (
    ("--event-from", "Events that occurred at or after this time."),
    ("--event-to", "Events that occurred at or before this time."),
    ("--delivered-from", "Deliveries whose last attempt ended at or after this time."),
    ("--delivered-to", "Deliveries whose last attempt ended at or before this time."),
)


def filter_options(command: F) -> F:
    """The monitor's filters, declared once for ``list`` and ``export``."""
    decorators = [
        click.option(
            "--kind",
            type=click.Choice([k.value for k in RowKind]),
            default=None,
            help="delivery rows, or event-only rows (no callback could be scheduled).",
        ),
        click.option("--status", type=click.Choice(STATUSES), default=None, help="Status."),
        click.option(
            "--http-class",
            type=click.Choice(HTTP_CLASSES),
            default=None,
            help="Class of the last answer (no_response: timeout or network failure).",
        ),
        click.option("--endpoint", default=None, help="Only this endpoint id."),
        click.option("--business-key", default=None, help="Only this business key."),
        *(
            click.option(name, default=None, metavar="TIME", help=f"{text} RFC 3339 or -2h.")
            for name, text in _TIMES
        ),
    ]
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


def _filter(sim: Simulator, options: dict[str, Any]) -> RowFilter:
    now = sim.now()

    def when(name: str) -> Any:
        value = options[name.strip("-").replace("-", "_")]
        return None if value is None else parse_deadline(value, now, option=name)

    return RowFilter(
        event_from=when("--event-from"),
        event_to=when("--event-to"),
        delivered_from=when("--delivered-from"),
        delivered_to=when("--delivered-to"),
        kind=options["kind"],
        status=options["status"],
        http_class=options["http_class"],
        endpoint_id=options["endpoint"],
        business_key=options["business_key"],
    )


@click.group("deliveries", invoke_without_command=True)
@click.pass_context
def deliveries_group(ctx: click.Context) -> None:
    """Inspect and export deliveries and event-only events."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


@deliveries_group.command("list")
@filter_options
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N rows.")
@db_option
@json_option
def deliveries_list_command(limit: int | None, db: str, as_json: bool, **options: Any) -> int:
    """List deliveries and event-only events matching every filter, by event time."""
    store = open_store(db, must_exist=True)
    try:
        sim = Simulator(store, clock=session_clock(store, virtual=True))
        found = sim.rows(_filter(sim, options))[:limit]
        if as_json:
            click.echo(json.dumps([row_json(r) for r in found], indent=2))
            return 0
        out = make_console()
        if not found:
            out.print("No rows match.")
            return 0
        table = [
            (
                r.kind.value,
                r.event.event_id,
                r.delivery.delivery_id if r.delivery else "-",
                r.endpoint_id or "-",
                r.status,
                r.http_class or "-",
                r.business_key or "-",
                rfc3339(r.event_time),
                rfc3339(r.delivery_time) if r.delivery_time else "-",
            )
            for r in found
        ]
        headers = (
            "KIND",
            "EVENT",
            "DELIVERY",
            "ENDPOINT",
            "STATUS",
            "HTTP",
            "BUSINESS KEY",
            "EVENT TIME",
            "DELIVERY TIME",
        )
        print_table(out, headers, table)
        out.print(f"{len(found)} row(s)")
        return 0
    finally:
        store.close()


@deliveries_group.command("export")
@click.option("--csv", "csv_path", required=True, metavar="FILE", help="Write the CSV here.")
@filter_options
@db_option
def deliveries_export_command(csv_path: str, db: str, **options: Any) -> int:
    """Export the filtered rows as CSV (at most 5000: more is refused, nothing written)."""
    target = Path(csv_path)
    if target.is_dir():
        raise StoreError(f"--csv {csv_path} is a folder, not a file")
    store = open_store(db, must_exist=True)
    try:
        sim = Simulator(store, clock=session_clock(store, virtual=True))
        where = _filter(sim, options)
        folder = target.resolve().parent
        try:
            handle, temporary = tempfile.mkstemp(prefix=".export-", suffix=".csv", dir=folder)
        except OSError as error:
            raise StoreError(
                f"cannot write --csv {csv_path}: {os_reason(error, writing=True)}"
            ) from None
        try:
            with os.fdopen(handle, "w", newline="", encoding="utf-8") as out:
                count = sim.export_csv(where, out)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        make_console().print(f"Exported {count} row(s) to {csv_path} (limit {EXPORT_LIMIT})")
        return 0
    finally:
        store.close()
