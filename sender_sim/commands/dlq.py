"""``hookproof dlq list|redrive``: browse the dead-letter queue and redrive from it.

``dlq list`` prints the dead letters of the sender database as a table (or JSON). ``dlq redrive``
records one audited, all-or-nothing, compare-and-set decision and, unless ``--queue-only``, sends
the redriven deliveries; exit status 0 queued (and every redriven delivery delivered), 1 refused or
dead-lettered again, 2 a usage or configuration error (one line, printed by the root CLI).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import click
from rich.console import Console

from receiver.commands.console import make_console, print_table
from sender_sim.commands.options import (
    db_option,
    json_option,
    secret_option,
    seed_option,
    time_option,
)
from sender_sim.commands.reports import (
    delivery_json,
    last_outcome,
    last_seq,
    queued_result,
    row_printer,
)
from sender_sim.commands.support import (
    announce_start,
    clock_end_note,
    delivery_client,
    open_store,
    parse_deadline,
    run_deliveries,
    sending_secrets,
    session_clock,
)
from sender_sim.exceptions import RedriveRefused
from sender_sim.policy import POLICIES, policy_named
from sender_sim.records import DeadLetterReason, State, rfc3339
from sender_sim.redrive import RedriveScope
from sender_sim.simulator import Simulator
from sender_sim.store import SQLiteStore

__all__ = ["REASONS", "dlq_group", "dlq_list_command", "dlq_redrive_command"]

REASONS = tuple(reason.value for reason in DeadLetterReason)
"""The dead-letter reasons ``--reason`` and ``--dlq-reason`` choose from."""


@click.group("dlq", invoke_without_command=True)
@click.pass_context
def dlq_group(ctx: click.Context) -> None:
    """Browse and redrive the dead-letter queue."""
    if ctx.invoked_subcommand is None:  # bare `hookproof dlq`: its help, exit status 0
        click.echo(ctx.get_help())


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
    out = make_console()
    store = open_store(db, must_exist=True)
    try:
        sim = Simulator(store, clock=session_clock(store, virtual=True))
        items = sim.dlq(reason=reason, business_key=business_key, endpoint_id=endpoint, limit=limit)
        if as_json:
            click.echo(json.dumps([delivery_json(sim, d) for d in items], indent=2))
            return 0
        if not items:
            out.print("No dead letters match.")
            return 0
        rows = [
            (
                d.delivery_id,
                d.business_key or "-",
                d.reason.value if d.reason else "?",
                f"{d.attempt}/{d.max_attempts}",
                rfc3339(d.deadline_at),
                last_outcome(sim, d),
            )
            for d in items
        ]
        headers = ("DELIVERY", "BUSINESS KEY", "REASON", "ATTEMPTS", "DEADLINE", "LAST OUTCOME")
        print_table(out, headers, rows)
        out.print(f"{len(items)} dead letter(s)")
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
    keys = sending_secrets(secrets, queue_only=queue_only, what="redriven deliveries")
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
    out = make_console()
    async with delivery_client() as client:
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
        started = announce_start(sim, out, as_json=as_json)
        deadline_at = parse_deadline(deadline, started)
        if not queue_only:
            for endpoint_id in sorted({d.endpoint_id for d in candidates}):
                if store.endpoint(endpoint_id) is not None:
                    sim.use_secrets(endpoint_id, keys)
        try:
            result = sim.redrive(actor=actor, reason=reason, deadline_at=deadline_at, scope=scope)
        except RedriveRefused as refused:
            _report_refused(out, refused, actor, as_json)
            return 1
        if not as_json:
            out.print(
                f"Redrive decision {result.decision_id} by {actor}: queued "
                f'{len(result.delivery_ids)} delivery(ies); reason "{reason}"; new deadline '
                f"{rfc3339(result.deadline_at)}"
            )
        if not queue_only:
            await run_deliveries(
                sim,
                result.delivery_ids,
                on_row=None if as_json else row_printer(out),
                seen={d: last_seq(sim, d) for d in result.delivery_ids},
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
                        "items": [delivery_json(sim, d) for d in finals],
                    },
                    indent=2,
                )
            )
            return 0 if queue_only or all(d.state is State.DELIVERED for d in finals) else 1
        return queued_result(
            out, finals, queue_only=queue_only, end_note=clock_end_note(sim.clock, started)
        )


def _report_refused(out: Console, refused: RedriveRefused, actor: str, as_json: bool) -> None:
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
    out.print(f"Redrive decision {refused.decision_id} by {actor}: REFUSED; nothing was queued")
    for problem in refused.problems:
        where = problem.delivery_id or "scope"
        out.print(f"  {where}: {problem.message} [{problem.code}]")
