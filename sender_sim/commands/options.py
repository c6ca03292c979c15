"""The options the sender commands (and the sandbox) share, declared once on top of
:mod:`receiver.commands.options`: the sender database, the seed of the simulator's draws, the retry
policy, virtual or real time, the endpoint's name, and ``--json``."""

from __future__ import annotations

import click

from receiver.commands import options as shared
from receiver.redaction import shown_url
from sender_sim.commands.support import DEFAULT_DB
from sender_sim.policy import POLICIES

__all__ = [
    "db_option",
    "endpoint_id_option",
    "endpoint_named",
    "json_option",
    "policy_option",
    "scheme_option",
    "secret_option",
    "seed_option",
    "time_option",
]

POLICY_HELP = (
    "Retry policy: strict (exponential backoff; 401/403 and other 4xx dead-letter at once) or "
    "schedule (a fixed schedule; every answer but 2xx and 410 is retried)."
)

secret_option = shared.secret_option()
scheme_option = shared.scheme_option()
seed_option = shared.seed_option(draws="the jitter and fault draws")
db_option = shared.db_option(
    default=DEFAULT_DB,
    help="The sender database (SQLite file) shared by send, dlq, explain and sandbox.",
)
time_option = click.option(
    "--virtual-time/--real-time",
    "virtual",
    default=True,
    show_default=True,
    help="Virtual: backoff waits take no wall time (signatures still carry real time).",
)
policy_option = click.option(
    "--policy",
    "policy_name",
    type=click.Choice(sorted(POLICIES)),
    default="strict",
    show_default=True,
    help=POLICY_HELP,
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
endpoint_id_option = click.option(
    "--endpoint-id",
    default=None,
    help="Name the endpoint in the database (default: the URL, without its credentials).",
)


def endpoint_named(endpoint_id: str | None, url: str) -> str:
    """The endpoint's id: the one given, else ``url`` as shown (its password and token values
    never become a name that every list, export and metric label repeats)."""
    return endpoint_id or shown_url(url)
