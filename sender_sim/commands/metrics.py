"""``hookproof metrics``: the observability list of the sender database, at the simulated now.

Attempts by classification, the oldest eligible delivery's wait, time left to the deadline by
cohort, both kinds of lease-expiry duplicate, dead letters by reason, redrive outcomes, event-only
events, and the deliveries whose next safe attempt no longer fits before their deadline. As text
(default), JSON, or the Prometheus text exposition format (``--format prometheus``).
"""

from __future__ import annotations

import json

import click

from sender_sim.commands.options import db_option
from sender_sim.commands.support import open_store, session_clock
from sender_sim.exposition import prometheus_text
from sender_sim.simulator import Simulator

__all__ = ["metrics_command"]


@click.command("metrics")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "prometheus"]),
    default="text",
    show_default=True,
    help="Plain text, JSON, or the Prometheus text exposition format.",
)
@db_option
def metrics_command(fmt: str, db: str) -> int:
    """Print the sender's metrics, including deliveries that can no longer meet their deadline."""
    store = open_store(db, must_exist=True)
    try:
        snapshot = Simulator(store, clock=session_clock(store, virtual=True)).metrics()
        if fmt == "prometheus":
            click.echo(prometheus_text(snapshot), nl=False)
        elif fmt == "json":
            click.echo(json.dumps(snapshot.as_dict(), indent=2))
        else:
            click.echo(snapshot.render())
        return 0
    finally:
        store.close()
