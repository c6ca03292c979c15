"""``hookproof explain DELIVERY_ID``: a delivery's whole story from the ledger, in plain words
(or JSON with every row and its transition)."""

from __future__ import annotations

import json

import click

from receiver.commands.console import make_console
from sender_sim.commands.options import db_option, json_option
from sender_sim.commands.reports import delivery_json, row_json
from sender_sim.commands.support import open_store, session_clock, transition_text
from sender_sim.simulator import Simulator

__all__ = ["explain_command"]


@click.command("explain")
@click.argument("delivery_id")
@db_option
@json_option
def explain_command(delivery_id: str, db: str, as_json: bool) -> int:
    """Tell a delivery's whole story: every attempt, outcome, lease and decision, with times
    and the deadline budget left."""
    out = make_console()
    store = open_store(db, must_exist=True)
    try:
        sim = Simulator(store, clock=session_clock(store, virtual=True))
        text = sim.explain(delivery_id)
        if as_json:
            document = delivery_json(sim, sim.delivery(delivery_id))
            document.update(
                ledger=[
                    dict(row_json(r), transition=transition_text(r))
                    for r in sim.ledger(delivery_id)
                ],
                explanation=text,
            )
            click.echo(json.dumps(document, indent=2))
        else:
            out.print(text)
        return 0
    finally:
        store.close()
