"""Runs to completion against a real URL: the reference receiver served by uvicorn on loopback,
the simulator on a virtual clock (days of backoff in no wall time), signatures on real time."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import httpx

from receiver.app import ReceiverSettings, create_app
from receiver.server import running_server
from sender_sim import (
    DeadLetterReason,
    FaultPlan,
    Simulator,
    SQLiteStore,
    State,
    VirtualClock,
    policy_named,
)
from tests.sender_sim.conftest import SECRET, T0

TOKEN = "probe-token-real-http"


def test_deliveries_over_real_http_to_the_reference_receiver(tmp_path: Path) -> None:
    app = create_app(
        ReceiverSettings(secrets=[SECRET], db=str(tmp_path / "inbox.db"), probe_token=TOKEN)
    )
    with running_server(app) as base_url:

        async def run() -> tuple[Simulator, str, str, dict[str, object]]:
            async with httpx.AsyncClient() as client:
                sim = Simulator(
                    SQLiteStore(tmp_path / "sender.db"),
                    clock=VirtualClock(T0),
                    policy=policy_named("schedule"),
                    client=client,
                    faults=FaultPlan.parse(["lost_response:attempts=1,delivery=del_lost"]),
                )
                sim.add_endpoint("reference", f"{base_url}/webhooks", [SECRET])
                deadline = T0 + timedelta(days=3)
                lost = sim.publish(
                    endpoint_id="reference",
                    deadline_at=deadline,
                    event_type="renewal.reminder",
                    data={"renewal_id": "ren_1"},
                    delivery_id="del_lost",
                    event_id="evt_real_1",
                )
                failing = sim.publish(
                    endpoint_id="reference",
                    deadline_at=deadline,
                    event_type="hookproof.demo.unavailable",  # the demo app answers 503 to it
                )
                await sim.run_until_settled()
                probe = await client.get(
                    f"{base_url}/_hookproof/events/evt_real_1",
                    headers={"authorization": f"Bearer {TOKEN}"},
                )
                return sim, lost, failing, probe.json()

        sim, lost, failing, probe = asyncio.run(run())
    delivered = sim.delivery(lost)
    assert (delivered.state, delivered.attempt) == (State.DELIVERED, 2)
    assert [a.status for a in sim.attempts(lost)] == [None, 200]
    assert probe["effects"] == 1
    assert probe["deliveries"] == 2
    gave_up = sim.delivery(failing)
    assert (gave_up.state, gave_up.reason) == (
        State.DEAD_LETTER,
        DeadLetterReason.ATTEMPTS_EXHAUSTED,
    )
    attempts = sim.attempts(failing)
    assert [a.status for a in attempts] == [503] * 10
    # the seed-002 schedule, measured from each preceding scheduled time: the last attempt at
    # 0 + 1m + 5m + 15m + 1h + 6h·5 = 31h21m after publication
    assert attempts[-1].started_at - T0 == timedelta(hours=31, minutes=21)
    sim.store.close()
