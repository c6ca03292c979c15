"""``hookproof shadow ATTEMPTS.jsonl --policy …``: compare an existing worker's decisions with ours.

Reads the JSON-lines attempt log described in :mod:`sender_sim.shadow`, runs every attempt
through our state machine under the chosen policy (nothing is sent or stored) and prints every
disagreement — retry versus dead letter, the dead-letter reason, the next due time, a retry that
cannot fit the deadline. Exit status 0 when every decision agrees, 1 when some disagree, 2 for an
unreadable log or a usage error.
"""

from __future__ import annotations

import json

import click

from receiver.commands.console import make_console, print_table
from receiver.commands.files import read_text
from sender_sim.commands.options import json_option, policy_option
from sender_sim.commands.support import parse_duration
from sender_sim.exceptions import ConfigurationError
from sender_sim.policy import policy_named
from sender_sim.shadow import parse_records, shadow

__all__ = ["shadow_command"]


@click.command("shadow")
@click.argument("attempts_log", metavar="ATTEMPTS.jsonl")
@policy_option
@click.option(
    "--tolerance",
    default="1s",
    show_default=True,
    help="How far a next due time may differ before it counts as a disagreement.",
)
@json_option
def shadow_command(attempts_log: str, policy_name: str, tolerance: str, as_json: bool) -> int:
    """Replay an existing worker's attempt log through our state machine and report every
    decision that differs; nothing is sent."""
    text = read_text(attempts_log, "the attempts log", ConfigurationError)
    policy = policy_named(policy_name)
    compared, found = shadow(
        list(parse_records(text.splitlines())), policy, tolerance=parse_duration(tolerance)
    )
    if as_json:
        click.echo(
            json.dumps(
                {
                    "policy": policy.version,
                    "compared": compared,
                    "disagreements": [d.as_dict() for d in found],
                },
                indent=2,
            )
        )
        return 1 if found else 0
    out = make_console()
    if found:
        rows = [
            (
                str(d.record.line),
                d.record.delivery_id,
                str(d.record.attempt),
                d.kind,
                d.theirs,
                d.ours,
            )
            for d in found
        ]
        print_table(out, ("LINE", "DELIVERY", "ATTEMPT", "WHAT", "THEIRS", "OURS"), rows)
        for d in found:
            out.print(f"line {d.record.line}: {d.explanation}")
    out.print(
        f"{compared} attempt(s) compared under policy {policy.version}: "
        f"{len(found)} disagreement(s); nothing was sent"
    )
    return 1 if found else 0
