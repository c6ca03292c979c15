"""``hookproof endpoints add|list|disable|enable|delete|history``: the sender database's endpoints.

An endpoint has a URL, a signing scheme, a per-request timeout (default 5 s), an active flag and
its event-type subscriptions (``--event-type``, repeatable; none: every type). The database keeps
a fingerprint of the secret, never the secret (commands that send take ``--secret`` again).
``delete`` removes the endpoint's delivery history; ``history`` shows its setup history (created,
changed, disabled, enabled, deleted, by whom, settings before and after), which deletion keeps.
Exit status 0, or 2 for a usage error or an unknown endpoint (one line).
"""

from __future__ import annotations

import json
from typing import Any

import click

from receiver.commands.console import make_console, print_table
from receiver.commands.options import warn_about_secrets
from receiver.durations import POSITIVE_DURATION
from receiver.redaction import shown_url
from sender_sim.commands.options import db_option, json_option, scheme_option, secret_option
from sender_sim.commands.support import open_store, session_clock
from sender_sim.endpoints import settings
from sender_sim.records import DEFAULT_ENDPOINT_TIMEOUT, Endpoint, EndpointChange, rfc3339
from sender_sim.simulator import Simulator

__all__ = ["endpoints_group"]

actor_option = click.option(
    "--actor", default="operator", show_default=True, help="Who makes the change (recorded)."
)


@click.group("endpoints", invoke_without_command=True)
@click.pass_context
def endpoints_group(ctx: click.Context) -> None:
    """Configure the endpoints events fan out to, and read their setup history."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


def _simulator(db: str, *, must_exist: bool = True) -> Simulator:
    store = open_store(db, must_exist=must_exist)
    return Simulator(store, clock=session_clock(store, virtual=True))


def _types(endpoint: Endpoint) -> str:
    return "(all)" if endpoint.event_types is None else ", ".join(endpoint.event_types)


@endpoints_group.command("add")
@click.argument("endpoint_id")
@click.argument("url")
@secret_option
@scheme_option
@click.option(
    "--timeout",
    type=POSITIVE_DURATION,
    default=DEFAULT_ENDPOINT_TIMEOUT.total_seconds(),
    show_default=True,
    help="Seconds to wait for each answer from this endpoint.",
)
@click.option(
    "--event-type",
    "event_types",
    multiple=True,
    metavar="TYPE",
    help="Subscribe to this event type (repeatable; none given: every type).",
)
@click.option("--disabled", is_flag=True, help="Add it disabled (nothing is sent to it).")
@actor_option
@db_option
def endpoints_add_command(
    endpoint_id: str,
    url: str,
    secrets: tuple[str, ...],
    scheme: str,
    timeout: float,
    event_types: tuple[str, ...],
    disabled: bool,
    actor: str,
    db: str,
) -> int:
    """Add ENDPOINT_ID at URL, or change it (the setup history records either)."""
    if not secrets:
        raise click.UsageError("an endpoint needs --secret (or HOOKPROOF_SECRET)")
    warn_about_secrets(scheme, secrets)
    sim = _simulator(db, must_exist=False)
    try:
        endpoint = sim.add_endpoint(
            endpoint_id,
            url,
            secrets,
            scheme=scheme,
            timeout=timeout,
            event_types=event_types or None,
            active=not disabled,
            actor=actor,
        )
        state = "active" if endpoint.active else "disabled"
        make_console().print(
            f"Endpoint {endpoint_id} -> {shown_url(url)} ({state}, scheme {scheme}, "
            f"timeout {timeout:g} s, event types {_types(endpoint)})"
        )
        return 0
    finally:
        sim.store.close()


@endpoints_group.command("list")
@db_option
@json_option
def endpoints_list_command(db: str, as_json: bool) -> int:
    """List the endpoints configured now."""
    sim = _simulator(db)
    try:
        found = sim.endpoints()
        if as_json:
            click.echo(json.dumps([{"endpoint_id": e.endpoint_id, **settings(e)} for e in found]))
            return 0
        out = make_console()
        if not found:
            out.print("No endpoints.")
            return 0
        rows = [
            (
                e.endpoint_id,
                shown_url(e.url),
                "active" if e.active else "disabled",
                e.scheme,
                f"{e.timeout.total_seconds():g} s",
                _types(e),
            )
            for e in found
        ]
        print_table(out, ("ENDPOINT", "URL", "STATE", "SCHEME", "TIMEOUT", "EVENT TYPES"), rows)
        return 0
    finally:
        sim.store.close()


def _set_active(endpoint_id: str, active: bool, actor: str, db: str) -> int:
    sim = _simulator(db)
    try:
        sim.set_endpoint_active(endpoint_id, active, actor=actor)
        word = "enabled: automatic sends resume" if active else "disabled: nothing automatic"
        make_console().print(f"Endpoint {endpoint_id} {word}")
        return 0
    finally:
        sim.store.close()


@endpoints_group.command("disable")
@click.argument("endpoint_id")
@actor_option
@db_option
def endpoints_disable_command(endpoint_id: str, actor: str, db: str) -> int:
    """Stop every automatic send to ENDPOINT_ID (what falls due is held, not sent)."""
    return _set_active(endpoint_id, False, actor, db)


@endpoints_group.command("enable")
@click.argument("endpoint_id")
@actor_option
@db_option
def endpoints_enable_command(endpoint_id: str, actor: str, db: str) -> int:
    """Let automatic sends to ENDPOINT_ID resume."""
    return _set_active(endpoint_id, True, actor, db)


@endpoints_group.command("delete")
@click.argument("endpoint_id")
@click.option("--actor", required=True, help="Who deletes it (recorded in the setup history).")
@db_option
def endpoints_delete_command(endpoint_id: str, actor: str, db: str) -> int:
    """Delete ENDPOINT_ID and its delivery history; its setup history is kept."""
    sim = _simulator(db)
    try:
        removed = sim.delete_endpoint(endpoint_id, actor=actor)
        make_console().print(
            f"Endpoint {endpoint_id} deleted with {removed} delivery(ies); events left without "
            "a delivery are history_unavailable. Its setup history is kept."
        )
        return 0
    finally:
        sim.store.close()


def _change_json(change: EndpointChange) -> dict[str, Any]:
    return {
        "endpoint_id": change.endpoint_id,
        "at": rfc3339(change.at),
        "actor": change.actor,
        "action": change.action,
        "before": change.before,
        "after": change.after,
    }


def _differences(change: EndpointChange) -> str:
    before, after = change.before or {}, change.after or {}
    if not before or not after:
        shown = after or before
        return ", ".join(f"{k}={v}" for k, v in shown.items())
    return ", ".join(
        f"{k}: {before.get(k)} -> {after.get(k)}" for k in after if before.get(k) != after.get(k)
    )


@endpoints_group.command("history")
@click.argument("endpoint_id", required=False)
@db_option
@json_option
def endpoints_history_command(endpoint_id: str | None, db: str, as_json: bool) -> int:
    """The setup history of ENDPOINT_ID (or of every endpoint), deleted ones included."""
    sim = _simulator(db)
    try:
        history = sim.endpoint_history(endpoint_id)
        if as_json:
            click.echo(json.dumps([_change_json(c) for c in history], indent=2))
            return 0
        out = make_console()
        if not history:
            out.print("No setup history.")
            return 0
        rows = [(rfc3339(c.at), c.endpoint_id, c.action, c.actor, _differences(c)) for c in history]
        print_table(out, ("AT", "ENDPOINT", "ACTION", "ACTOR", "SETTINGS"), rows)
        return 0
    finally:
        sim.store.close()
