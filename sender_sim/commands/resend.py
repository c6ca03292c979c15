"""``hookproof resend ID…``: one more real attempt, all or nothing, for 1-100 ids.

An id is a delivery id (a delivered or dead-letter delivery whose endpoint exists and is active:
resent to that endpoint, even after a 2xx) or an event id (an event-only or dead-letter event:
sent to the endpoints active and subscribed now). Same event id and body, fresh timestamp and
signature; the lifetime attempt count is kept. Unless ``--queue-only``, the queued deliveries are
then sent (with ``--secret``). Exit status 0 queued (and delivered), 1 refused
(``WEBHOOK_DELIVERY_NOT_REPLAYABLE``: nothing was queued) or not delivered, 2 a usage error.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import click

from receiver.commands.console import make_console
from sender_sim.commands.options import (
    db_option,
    json_option,
    policy_option,
    secret_option,
    seed_option,
    time_option,
)
from sender_sim.commands.reports import delivery_json, last_seq, queued_result, row_printer
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
from sender_sim.exceptions import ResendRefused
from sender_sim.policy import policy_named
from sender_sim.records import State
from sender_sim.simulator import Simulator
from sender_sim.store import SQLiteStore

__all__ = ["resend_command"]


@click.command("resend")
@click.argument("ids", nargs=-1, required=True)
@click.option("--actor", required=True, help="Who asks for the resend (recorded).")
@click.option(
    "--deadline",
    default=None,
    help="Deadline of the resent attempts: RFC 3339 or +1h (default: the later of their own "
    "and one hour from now).",
)
@click.option(
    "--queue-only", is_flag=True, help="Queue the resend but do not send (no secret needed)."
)
@secret_option
@policy_option
@seed_option
@time_option
@db_option
@json_option
def resend_command(
    ids: tuple[str, ...],
    actor: str,
    deadline: str | None,
    queue_only: bool,
    secrets: tuple[str, ...],
    policy_name: str,
    seed: int,
    virtual: bool,
    db: str,
    as_json: bool,
) -> int:
    """Resend deliveries (even delivered ones) or event-only / dead-letter events, all or
    nothing; already pending or in-flight work is refused."""
    keys = sending_secrets(secrets, queue_only=queue_only, what="resent deliveries")
    store = open_store(db, must_exist=True)
    try:
        return asyncio.run(
            _resend(
                store, ids, actor, deadline, queue_only, keys, policy_name, seed, virtual, as_json
            )
        )
    finally:
        store.close()


async def _resend(
    store: SQLiteStore,
    ids: Sequence[str],
    actor: str,
    deadline: str | None,
    queue_only: bool,
    keys: Sequence[str],
    policy_name: str,
    seed: int,
    virtual: bool,
    as_json: bool,
) -> int:
    out = make_console()
    async with delivery_client() as client:
        sim = Simulator(
            store,
            clock=session_clock(store, virtual=virtual),
            policy=policy_named(policy_name),
            client=client,
            seed=seed,
        )
        started = announce_start(sim, out, as_json=as_json)
        deadline_at = None if deadline is None else parse_deadline(deadline, started)
        try:
            result = sim.resend(ids, actor=actor, deadline_at=deadline_at)
        except ResendRefused as refused:
            if as_json:
                click.echo(
                    json.dumps(
                        {
                            "result": "refused",
                            "code": refused.code,
                            "ineligible": refused.ineligible,
                        },
                        indent=2,
                    )
                )
            else:
                out.print(f"Resend REFUSED [{refused.code}]: nothing was queued")
                for item, why in refused.ineligible.items():
                    out.print(f"  {item or 'request'}: {why}")
            return 1
        queued = (*result.delivery_ids, *result.new_delivery_ids)
        if not as_json:
            out.print(f"Resend by {actor}: queued {len(queued)} delivery(ies)")
        if not queue_only:
            for endpoint_id in sorted({sim.delivery(d).endpoint_id for d in queued}):
                sim.use_secrets(endpoint_id, keys)
            seen = {d: last_seq(sim, d) for d in queued}
            await run_deliveries(
                sim, queued, on_row=None if as_json else row_printer(out), seen=seen
            )
        finals = [sim.delivery(d) for d in queued]
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "result": "queued",
                        "actor": actor,
                        "sent": not queue_only,
                        "by_id": {k: list(v) for k, v in result.by_id.items()},
                        "items": [delivery_json(sim, d) for d in finals],
                    },
                    indent=2,
                )
            )
            return 0 if queue_only or all(d.state is State.DELIVERED for d in finals) else 1
        return queued_result(
            out, finals, queue_only=queue_only, end_note=clock_end_note(sim.clock, started)
        )
