"""``hookproof send``: one signed event to a URL through the whole sender state machine.

The command opens the sender database (``--db``, default ``hookproof-sender.sqlite`` in the current
folder) so state survives between commands, builds a :class:`~sender_sim.simulator.Simulator` over
it, prints every transition as it happens and returns its exit status: 0 delivered, 1
dead-lettered; 2 for every usage or configuration error, printed by the root CLI as one line (a
:class:`~sender_sim.exceptions.SimulatorError` or a click usage error, never a traceback).
Secrets are never printed and never stored (the database keeps a fingerprint).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import click

from receiver.commands.console import make_console
from receiver.commands.files import json_of, read_text
from receiver.commands.options import required_secrets, timeout_option, warn_about_secrets
from receiver.redaction import shown_url
from sender_sim.commands.options import (
    db_option,
    endpoint_id_option,
    endpoint_named,
    json_option,
    policy_option,
    scheme_option,
    secret_option,
    seed_option,
    time_option,
)
from sender_sim.commands.reports import delivery_json, row_json, row_printer, verdict
from sender_sim.commands.support import (
    announce_start,
    check_url,
    clock_end_note,
    delivery_client,
    open_store,
    parse_deadline,
    run_deliveries,
    session_clock,
)
from sender_sim.exceptions import ConfigurationError
from sender_sim.faults import FaultPlan
from sender_sim.policy import Policy, policy_named
from sender_sim.policy_file import load_policy_file
from sender_sim.records import State, rfc3339
from sender_sim.simulator import Simulator
from sender_sim.store import SQLiteStore

__all__ = ["DEFAULT_EVENT_TYPE", "EventSpec", "load_event_file", "send_command"]

DEFAULT_EVENT_TYPE = "hookproof.test"


@dataclass(frozen=True)
class EventSpec:
    """What ``--event FILE`` contributes: a data object, or a complete body sent byte for byte."""

    data: dict[str, Any] | None = None
    body: bytes | None = None
    event_type: str | None = None
    event_id: str | None = None


def load_event_file(path: str) -> EventSpec:
    """Read ``--event FILE``: a JSON object. With top-level ``type`` and ``data`` it is the whole
    body (sent byte for byte; ``id`` is the event id when present); otherwise it is the ``data``."""
    raw = read_text(path, "--event", click.UsageError)
    document = json_of(raw, f"--event {path!r}", click.UsageError)
    if not isinstance(document, dict):
        raise click.UsageError(f"--event {path} must hold a JSON object")
    if "type" in document and "data" in document:
        if not isinstance(document["type"], str) or not document["type"].strip():
            raise click.UsageError(f"--event {path}: 'type' must be a non-empty string")
        event_id = document.get("id")
        return EventSpec(
            body=raw.encode("utf-8"),  # the file's bytes: decoding UTF-8 lost nothing
            event_type=document["type"],
            event_id=event_id if isinstance(event_id, str) else None,
        )
    return EventSpec(data=document)


def _policy(name: str, policy_file: str | None, timeout: float | None) -> Policy:
    policy = load_policy_file(policy_file) if policy_file else policy_named(name)
    if timeout is not None:
        wait = timedelta(seconds=timeout)
        policy = policy.with_(timeout=wait, lease_duration=max(policy.lease_duration, wait * 2))
    return policy


@click.command("send")
@click.argument("url")
@secret_option
@scheme_option
@click.option(
    "--event",
    "event_file",
    default=None,
    metavar="FILE",
    help="JSON event: the data object, or a whole body with top-level type and data.",
)
@click.option("--event-type", default=None, help=f"Event type (default {DEFAULT_EVENT_TYPE}).")
@click.option("--event-id", default=None, help="Event id (default: a fresh random evt_… id).")
@click.option("--business-key", default=None, help="Business key, e.g. ren_18427 (for DLQ).")
@click.option(
    "--deadline",
    default="+24h",
    show_default=True,
    help="RFC 3339 time, or a duration from now such as +30m or 2h.",
)
@policy_option
@click.option(
    "--policy-file",
    default=None,
    metavar="FILE",
    help="A TOML retry policy (delays or full jitter, attempts, timeout, classification; "
    "see docs/check-sender.md). Overrides --policy.",
)
@timeout_option(default_text="the policy's")
@click.option(
    "--fault",
    "faults",
    multiple=True,
    metavar="NAME[:k=v,…]",
    help="Inject a fault (repeatable), e.g. crash_after_send:attempts=1.",
)
@endpoint_id_option
@seed_option
@time_option
@db_option
@json_option
def send_command(
    url: str,
    secrets: tuple[str, ...],
    scheme: str,
    event_file: str | None,
    event_type: str | None,
    event_id: str | None,
    business_key: str | None,
    deadline: str,
    policy_name: str,
    policy_file: str | None,
    timeout: float | None,
    faults: tuple[str, ...],
    endpoint_id: str | None,
    seed: int,
    virtual: bool,
    db: str,
    as_json: bool,
) -> int:
    """Send one signed event to URL through the whole sender state machine.

    Prints every transition as it happens, then the final state and its explanation. Exit status:
    0 delivered, 1 dead-lettered, 2 usage or configuration error.
    """
    check_url(url)
    keys = required_secrets(secrets)
    warn_about_secrets(scheme, keys)
    spec = load_event_file(event_file) if event_file else EventSpec()
    plan = FaultPlan.parse(faults, seed=seed)
    policy = _policy(policy_name, policy_file, timeout)
    store = open_store(db)
    try:
        return asyncio.run(
            _send(
                store,
                url=url,
                keys=keys,
                scheme=scheme,
                spec=spec,
                event_type=event_type,
                event_id=event_id,
                business_key=business_key,
                deadline=deadline,
                policy=policy,
                plan=plan,
                endpoint_id=endpoint_named(endpoint_id, url),
                seed=seed,
                virtual=virtual,
                as_json=as_json,
                timeout_given=timeout is not None,
            )
        )
    finally:
        store.close()


async def _send(
    store: SQLiteStore,
    *,
    url: str,
    keys: Sequence[str],
    scheme: str,
    spec: EventSpec,
    event_type: str | None,
    event_id: str | None,
    business_key: str | None,
    deadline: str,
    policy: Policy,
    plan: FaultPlan,
    endpoint_id: str,
    seed: int,
    virtual: bool,
    as_json: bool,
    timeout_given: bool,
) -> int:
    """Configure the endpoint (a new one waits the policy's timeout; a stored one keeps its
    own unless --timeout is given, and keeps its subscriptions and active flag), publish, run."""
    out = make_console()
    async with delivery_client() as client:
        sim = Simulator(
            store,
            clock=session_clock(store, virtual=virtual),
            policy=policy,
            client=client,
            seed=seed,
            faults=plan,
        )
        started = announce_start(sim, out, as_json=as_json)
        deadline_at = parse_deadline(deadline, started)
        stored = store.endpoint(endpoint_id)
        if stored is not None and not stored.active:
            raise ConfigurationError(
                f"endpoint {endpoint_id} is disabled: nothing is sent to it "
                f"(hookproof endpoints enable {endpoint_id} first)"
            )
        wait = policy.timeout if stored is None or timeout_given else stored.timeout
        sim.add_endpoint(
            endpoint_id,
            url,
            keys,
            scheme=scheme,
            timeout=wait.total_seconds(),
            event_types=stored.event_types if stored else None,
            active=stored.active if stored else True,
            actor="hookproof send",
        )
        chosen_event_id = event_id or spec.event_id or f"evt_{uuid.uuid4().hex}"
        delivery_id = f"del_{uuid.uuid4().hex}"
        if not as_json:  # said before publishing: the first attempt is due the moment it is
            out.print(
                f"Sending event {chosen_event_id} as delivery {delivery_id} to {shown_url(url)} "
                f"(scheme {scheme}, policy {policy.name}, "
                f"{'virtual' if virtual else 'real'} time, deadline {rfc3339(deadline_at)})"
            )
        sim.publish(
            endpoint_id=endpoint_id,
            deadline_at=deadline_at,
            event_type=event_type or spec.event_type or DEFAULT_EVENT_TYPE,
            data=spec.data,
            body=spec.body,
            business_key=business_key,
            event_id=chosen_event_id,
            delivery_id=delivery_id,
        )
        await run_deliveries(sim, [delivery_id], on_row=None if as_json else row_printer(out))
        delivery = sim.delivery(delivery_id)
        explanation = sim.explain(delivery_id)
        if as_json:
            document = delivery_json(sim, delivery)
            document.update(
                policy=policy.name,
                clock="virtual" if virtual else "real",
                ledger=[row_json(r) for r in sim.ledger(delivery_id)],
                explanation=explanation,
            )
            click.echo(json.dumps(document, indent=2))
        else:
            out.print()
            out.print(f"Result: {verdict(delivery)}")
            out.print()
            out.print(explanation)
            note = clock_end_note(sim.clock, started)
            if note:
                out.print()
                out.print(note)
        return 0 if delivery.state is State.DELIVERED else 1
