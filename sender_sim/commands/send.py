"""The sender simulator's commands: ``hookproof send``, ``hookproof dlq list|redrive`` and
``hookproof explain``.

Each command opens the sender database (``--db``, default ``hookproof-sender.sqlite`` in the current
folder) so state survives between commands, builds a :class:`~sender_sim.simulator.Simulator` over
it and returns its exit status: ``send`` 0 delivered, 1 dead-lettered; ``dlq redrive`` 0 queued
(and, unless ``--queue-only``, every redriven delivery delivered), 1 refused or dead-lettered again;
2 for every usage or configuration error, printed by the root CLI as one line (a
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
from pathlib import Path
from typing import Any

import click
import httpx

from sender_sim.cli_support import (
    DEFAULT_DB,
    describe_row,
    open_store,
    parse_deadline,
    progress_line,
    run_deliveries,
    session_clock,
    split_secrets,
    transition_text,
)
from sender_sim.exceptions import RedriveRefused
from sender_sim.faults import FaultPlan
from sender_sim.policy import POLICIES, Policy, policy_named
from sender_sim.records import DeadLetterReason, Delivery, LedgerRow, State, rfc3339
from sender_sim.redrive import RedriveScope
from sender_sim.simulator import Simulator
from sender_sim.store import SQLiteStore

__all__ = [
    "DEFAULT_EVENT_TYPE",
    "EventSpec",
    "dlq_group",
    "explain_command",
    "load_event_file",
    "send_command",
]

DEFAULT_EVENT_TYPE = "hookproof.test"
SCHEMES = ("standard", "stripe", "github")
REASONS = tuple(reason.value for reason in DeadLetterReason)

db_option = click.option(
    "--db",
    default=DEFAULT_DB,
    show_default=True,
    metavar="PATH",
    help="The sender database (SQLite file) shared by send, dlq, explain and sandbox.",
)
secret_option = click.option(
    "--secret",
    "secrets",
    multiple=True,
    envvar="HOOKPROOF_SECRET",
    help="Signing secret (whsec_… for standard); repeat to sign with several (rotation). "
    "Env: HOOKPROOF_SECRET, several separated by spaces.",
)
time_option = click.option(
    "--virtual-time/--real-time",
    "virtual",
    default=True,
    show_default=True,
    help="Virtual: backoff waits take no wall time (signatures still carry real time).",
)
seed_option = click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the jitter and fault draws (replayable).",
)
scheme_option = click.option(
    "--scheme",
    type=click.Choice(SCHEMES),
    default="standard",
    show_default=True,
    help="Signing scheme.",
)
policy_option = click.option(
    "--policy",
    "policy_name",
    type=click.Choice(sorted(POLICIES)),
    default="strict",
    show_default=True,
    help="Retry policy: strict (seed 000) or schedule (seed 002).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")


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
    try:
        raw = Path(path).read_bytes()
    except OSError as error:
        raise click.UsageError(
            f"cannot read --event {path}: {error.strerror or type(error).__name__}"
        ) from None
    try:
        document = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise click.UsageError(f"--event {path} is not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise click.UsageError(
            f"--event {path} is not valid JSON (line {error.lineno}, column {error.colno}: "
            f"{error.msg})"
        ) from None
    if not isinstance(document, dict):
        raise click.UsageError(f"--event {path} must hold a JSON object")
    if "type" in document and "data" in document:
        if not isinstance(document["type"], str) or not document["type"].strip():
            raise click.UsageError(f"--event {path}: 'type' must be a non-empty string")
        event_id = document.get("id")
        return EventSpec(
            body=raw,
            event_type=document["type"],
            event_id=event_id if isinstance(event_id, str) else None,
        )
    return EventSpec(data=document)


def _check_url(url: str) -> str:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as error:
        raise click.UsageError(f"URL {url!r} is not a valid URL: {error}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise click.UsageError(f"URL must be http(s)://host[:port]/path, got {url!r}")
    return url


def _policy(name: str, timeout: float | None) -> Policy:
    policy = policy_named(name)
    if timeout is not None:
        wait = timedelta(seconds=timeout)
        policy = policy.with_(timeout=wait, lease_duration=max(policy.lease_duration, wait * 2))
    return policy


def _row_json(row: LedgerRow) -> dict[str, Any]:
    return {
        "seq": row.seq,
        "at": rfc3339(row.at),
        "from": row.from_state.value if row.from_state else None,
        "to": row.to_state.value if row.to_state else None,
        "actor": row.actor,
        "cause": row.cause,
        "reason": row.reason.value if row.reason else None,
        "text": describe_row(row),
    }


def _delivery_json(sim: Simulator, delivery: Delivery) -> dict[str, Any]:
    return {
        "delivery_id": delivery.delivery_id,
        "event_id": delivery.event_id,
        "endpoint_id": delivery.endpoint_id,
        "url": delivery.destination_url,
        "business_key": delivery.business_key,
        "state": delivery.state.value,
        "reason": delivery.reason.value if delivery.reason else None,
        "attempts": delivery.attempt,
        "max_attempts": delivery.max_attempts,
        "redrives": delivery.redrives,
        "deadline_at": rfc3339(delivery.deadline_at),
        "last_outcome": _last_outcome(sim, delivery),
    }


def _last_outcome(sim: Simulator, delivery: Delivery) -> str:
    attempts = sim.attempts(delivery.delivery_id)
    if not attempts:
        return "(no attempt)" if delivery.last_outcome is None else delivery.last_outcome
    last = attempts[-1]
    answer = f"HTTP {last.status}" if last.status is not None else last.kind.value
    return f"{answer} {last.classification}"


def _verdict(delivery: Delivery) -> str:
    if delivery.state is State.DELIVERED:
        return f"delivered after {delivery.attempt} attempt(s)"
    reason = delivery.reason.value if delivery.reason else "?"
    return f"dead letter ({reason}) after {delivery.attempt} attempt(s)"


def _echo_row(row: LedgerRow) -> None:
    click.echo(progress_line(row))


# -- send -----------------------------------------------------------------------------------------


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
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Seconds to wait for each answer (default: the policy's).",
)
@click.option(
    "--fault",
    "faults",
    multiple=True,
    metavar="NAME[:k=v,…]",
    help="Inject a fault (repeatable), e.g. crash_after_send:attempts=1.",
)
@click.option(
    "--endpoint-id", default=None, help="Name the endpoint in the database (default: the URL)."
)
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
    _check_url(url)
    keys = split_secrets(secrets)
    if not keys:
        raise click.UsageError("at least one --secret (or HOOKPROOF_SECRET) is required")
    spec = load_event_file(event_file) if event_file else EventSpec()
    plan = FaultPlan.parse(faults, seed=seed)
    policy = _policy(policy_name, timeout)
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
                endpoint_id=endpoint_id or url,
                seed=seed,
                virtual=virtual,
                as_json=as_json,
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
) -> int:
    async with httpx.AsyncClient() as client:
        sim = Simulator(
            store,
            clock=session_clock(store, virtual=virtual),
            policy=policy,
            client=client,
            seed=seed,
            faults=plan,
        )
        deadline_at = parse_deadline(deadline, sim.now())
        sim.add_endpoint(endpoint_id, url, keys, scheme=scheme)
        delivery_id = sim.publish(
            endpoint_id=endpoint_id,
            deadline_at=deadline_at,
            event_type=event_type or spec.event_type or DEFAULT_EVENT_TYPE,
            data=spec.data,
            body=spec.body,
            business_key=business_key,
            event_id=event_id or spec.event_id or f"evt_{uuid.uuid4().hex}",
            delivery_id=f"del_{uuid.uuid4().hex}",
        )
        delivery = sim.delivery(delivery_id)
        if not as_json:
            click.echo(
                f"Sending event {delivery.event_id} as delivery {delivery_id} to {url} "
                f"(scheme {scheme}, policy {policy.name}, "
                f"{'virtual' if virtual else 'real'} time, deadline {rfc3339(deadline_at)})"
            )
        await run_deliveries(sim, [delivery_id], on_row=None if as_json else _echo_row)
        delivery = sim.delivery(delivery_id)
        explanation = sim.explain(delivery_id)
        if as_json:
            document = _delivery_json(sim, delivery)
            document.update(
                policy=policy.name,
                clock="virtual" if virtual else "real",
                ledger=[_row_json(r) for r in sim.ledger(delivery_id)],
                explanation=explanation,
            )
            click.echo(json.dumps(document, indent=2))
        else:
            click.echo("")
            click.echo(f"Result: {_verdict(delivery)}")
            click.echo("")
            click.echo(explanation)
        return 0 if delivery.state is State.DELIVERED else 1


# -- dlq ------------------------------------------------------------------------------------------


@click.group("dlq", invoke_without_command=True)
@click.pass_context
def dlq_group(ctx: click.Context) -> None:
    """Browse and redrive the dead-letter queue."""
    if ctx.invoked_subcommand is None:  # bare `hookproof dlq`: its help, exit status 0
        click.echo(ctx.get_help())


def _table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    out.extend("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)
    return out


@dlq_group.command("list")
@click.option("--reason", type=click.Choice(REASONS), default=None, help="Dead-letter reason.")
@click.option("--business-key", default=None, help="Only this business key.")
@click.option("--endpoint", default=None, help="Only this endpoint id (send's default: the URL).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N rows.")
@db_option
@json_option
def dlq_list_command(
    reason: str | None,
    business_key: str | None,
    endpoint: str | None,
    limit: int | None,
    db: str,
    as_json: bool,
) -> int:
    """List dead letters: id, business key, reason, attempts, deadline, last outcome."""
    store = open_store(db, must_exist=True)
    try:
        sim = Simulator(store, clock=session_clock(store, virtual=True))
        items = sim.dlq(reason=reason, business_key=business_key, endpoint_id=endpoint, limit=limit)
        if as_json:
            click.echo(json.dumps([_delivery_json(sim, d) for d in items], indent=2))
            return 0
        if not items:
            click.echo("No dead letters match.")
            return 0
        rows = [
            (
                d.delivery_id,
                d.business_key or "-",
                d.reason.value if d.reason else "?",
                f"{d.attempt}/{d.max_attempts}",
                rfc3339(d.deadline_at),
                _last_outcome(sim, d),
            )
            for d in items
        ]
        headers = ("DELIVERY", "BUSINESS KEY", "REASON", "ATTEMPTS", "DEADLINE", "LAST OUTCOME")
        for line in _table(rows, headers):
            click.echo(line)
        click.echo(f"{len(items)} dead letter(s)")
        return 0
    finally:
        store.close()


def _split_ids(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def _recorded_policy(sim: Simulator, delivery_ids: Sequence[str]) -> str:
    for delivery_id in delivery_ids:
        for row in sim.ledger(delivery_id):
            name = row.details.get("policy")
            if row.from_state is None and isinstance(name, str) and name in POLICIES:
                return name
    return "strict"


@dlq_group.command("redrive")
@click.option("--actor", required=True, help="Who decides (recorded), e.g. ops@example.com.")
@click.option("--reason", required=True, help="Why (recorded with the decision).")
@click.option(
    "--deadline", required=True, help="The fresh deadline: RFC 3339, or +30m / 2h from now."
)
@click.option(
    "--ids",
    "ids",
    multiple=True,
    metavar="ID[,ID…]",
    help="Delivery ids (comma-separated or repeated).",
)
@click.option("--business-key", default=None, help="Scope: this business key.")
@click.option(
    "--dlq-reason", type=click.Choice(REASONS), default=None, help="Scope: this dead-letter reason."
)
@click.option("--endpoint", default=None, help="Scope: this endpoint id.")
@click.option(
    "--queue-only", is_flag=True, help="Queue the redrive but do not send (no secret needed)."
)
@secret_option
@click.option(
    "--policy",
    "policy_name",
    type=click.Choice(sorted(POLICIES)),
    default=None,
    help="Policy for the redriven attempt (default: the one each was published with).",
)
@seed_option
@time_option
@db_option
@json_option
def dlq_redrive_command(
    actor: str,
    reason: str,
    deadline: str,
    ids: tuple[str, ...],
    business_key: str | None,
    dlq_reason: str | None,
    endpoint: str | None,
    queue_only: bool,
    secrets: tuple[str, ...],
    policy_name: str | None,
    seed: int,
    virtual: bool,
    db: str,
    as_json: bool,
) -> int:
    """Redrive dead letters: an audited, all-or-nothing, compare-and-set decision.

    Needs --actor, --reason, --deadline and a scope (--ids, or at least one of --business-key,
    --dlq-reason, --endpoint). Unless --queue-only, the redriven deliveries are then sent to their
    endpoint (with --secret). Exit status: 0 queued (and delivered), 1 refused or dead-lettered
    again, 2 usage error.
    """
    scope = RedriveScope(
        business_key=business_key,
        reason=DeadLetterReason(dlq_reason) if dlq_reason else None,
        endpoint_id=endpoint,
        delivery_ids=_split_ids(ids),
    )
    if scope.is_empty:
        raise click.UsageError(
            "a redrive needs a scope: --ids, or --business-key / --dlq-reason / --endpoint"
        )
    keys = split_secrets(secrets)
    if not queue_only and not keys:
        raise click.UsageError(
            "sending the redriven deliveries needs --secret (or HOOKPROOF_SECRET); "
            "pass --queue-only to only queue them"
        )
    store = open_store(db, must_exist=True)
    try:
        return asyncio.run(
            _redrive(
                store,
                actor,
                reason,
                deadline,
                scope,
                keys,
                queue_only,
                policy_name,
                seed,
                virtual,
                as_json,
            )
        )
    finally:
        store.close()


async def _redrive(
    store: SQLiteStore,
    actor: str,
    reason: str,
    deadline: str,
    scope: RedriveScope,
    keys: Sequence[str],
    queue_only: bool,
    policy_name: str | None,
    seed: int,
    virtual: bool,
    as_json: bool,
) -> int:
    async with httpx.AsyncClient() as client:
        probe = Simulator(store, clock=session_clock(store, virtual=virtual))
        candidates = probe.deliveries(scope.as_filter())
        name = policy_name or _recorded_policy(probe, [d.delivery_id for d in candidates])
        sim = Simulator(
            store,
            clock=probe.clock,
            policy=policy_named(name),
            client=client,
            seed=seed,
        )
        deadline_at = parse_deadline(deadline, sim.now())
        if not queue_only:
            for endpoint_id in sorted({d.endpoint_id for d in candidates}):
                known = store.endpoint(endpoint_id)
                if known is not None:
                    sim.add_endpoint(
                        endpoint_id, known.url, keys, scheme=known.scheme, active=known.active
                    )
        try:
            result = sim.redrive(actor=actor, reason=reason, deadline_at=deadline_at, scope=scope)
        except RedriveRefused as refused:
            _report_refused(refused, actor, as_json)
            return 1
        if not as_json:
            click.echo(
                f"Redrive decision {result.decision_id} by {actor}: queued "
                f'{len(result.delivery_ids)} delivery(ies); reason "{reason}"; new deadline '
                f"{rfc3339(result.deadline_at)}"
            )
        if not queue_only:
            await run_deliveries(
                sim,
                result.delivery_ids,
                on_row=None if as_json else _echo_row,
                seen={d: _last_seq(sim, d) for d in result.delivery_ids},
            )
        finals = [sim.delivery(d) for d in result.delivery_ids]
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "decision_id": result.decision_id,
                        "result": "queued",
                        "actor": actor,
                        "reason": reason,
                        "deadline_at": rfc3339(result.deadline_at),
                        "sent": not queue_only,
                        "items": [_delivery_json(sim, d) for d in finals],
                    },
                    indent=2,
                )
            )
        else:
            click.echo("Result:")
            for d in finals:
                status = "queued (not sent: --queue-only)" if queue_only else _verdict(d)
                click.echo(f"  {d.delivery_id}  {status}")
        if queue_only:
            return 0
        return 0 if all(d.state is State.DELIVERED for d in finals) else 1


def _last_seq(sim: Simulator, delivery_id: str) -> int:
    """The last ledger row so far: the redrive row itself is reported by the decision line."""
    rows = sim.ledger(delivery_id)
    return rows[-1].seq if rows else 0


def _report_refused(refused: RedriveRefused, actor: str, as_json: bool) -> None:
    if as_json:
        click.echo(
            json.dumps(
                {
                    "decision_id": refused.decision_id,
                    "result": "refused",
                    "actor": actor,
                    "problems": [
                        {"delivery_id": p.delivery_id, "code": p.code, "message": p.message}
                        for p in refused.problems
                    ],
                },
                indent=2,
            )
        )
        return
    click.echo(f"Redrive decision {refused.decision_id} by {actor}: REFUSED; nothing was queued")
    for problem in refused.problems:
        where = problem.delivery_id or "scope"
        click.echo(f"  {where}: {problem.message} [{problem.code}]")


# -- explain --------------------------------------------------------------------------------------


@click.command("explain")
@click.argument("delivery_id")
@db_option
@json_option
def explain_command(delivery_id: str, db: str, as_json: bool) -> int:
    """Tell a delivery's whole story: every attempt, outcome, lease and decision, with times
    and the deadline budget left."""
    store = open_store(db, must_exist=True)
    try:
        sim = Simulator(store, clock=session_clock(store, virtual=True))
        text = sim.explain(delivery_id)
        if as_json:
            document = _delivery_json(sim, sim.delivery(delivery_id))
            document.update(
                ledger=[
                    dict(_row_json(r), transition=transition_text(r))
                    for r in sim.ledger(delivery_id)
                ],
                explanation=text,
            )
            click.echo(json.dumps(document, indent=2))
        else:
            click.echo(text)
        return 0
    finally:
        store.close()
