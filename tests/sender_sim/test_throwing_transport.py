"""A dispatch that throws (anything that is not an httpx transport error, e.g. from an in-process
ASGI app) releases only its own claim, due again in one minute, without a fabricated attempt or
result; the sibling deliveries of the same pass are recorded as usual."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import timedelta
from typing import Any

import httpx

from sender_sim import Simulator, State
from sender_sim.transitions import RELEASE_DELAY
from tests.sender_sim.conftest import T0, MakeSim

LATER = T0 + timedelta(hours=5)
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class Broken(RuntimeError):
    pass


def _app(
    broken: set[str], accepted: list[str]
) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """An in-process ASGI receiver that raises for the delivery ids in ``broken``."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        delivery_id = headers[b"hookproof-delivery-id"].decode()
        if delivery_id in broken:
            raise Broken(f"handler bug for {delivery_id}")
        accepted.append(delivery_id)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    return app


def _sim(make_sim: MakeSim, broken: set[str], accepted: list[str]) -> Simulator:
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=_app(broken, accepted)))
    return make_sim(client=client)


def test_one_throwing_dispatch_does_not_end_the_pass(make_sim: MakeSim) -> None:
    accepted: list[str] = []
    sim = _sim(make_sim, {"del_bad"}, accepted)
    bad = sim.publish(endpoint_id="partner", deadline_at=LATER, delivery_id="del_bad")
    good = sim.publish(endpoint_id="partner", deadline_at=LATER, delivery_id="del_good")
    report = asyncio.run(sim.run_due())
    assert accepted == [good]
    assert sim.delivery(good).state is State.DELIVERED
    assert report.released == 1
    released = sim.delivery(bad)
    assert released.state is State.SCHEDULED
    assert released.next_attempt_at == T0 + RELEASE_DELAY
    assert released.attempt == 0  # no attempt fabricated
    assert sim.attempts(bad) == []
    row = sim.ledger(bad)[-1]
    assert row.cause == "dispatch_failed"
    assert row.details["error_type"] == "Broken"
    assert "handler bug" in row.details["error"]
    assert "released" in sim.explain(bad)


def test_a_released_delivery_is_sent_again_a_minute_later(make_sim: MakeSim) -> None:
    accepted: list[str] = []
    broken = {"del_bad"}
    sim = _sim(make_sim, broken, accepted)
    bad = sim.publish(endpoint_id="partner", deadline_at=LATER, delivery_id="del_bad")
    asyncio.run(sim.run_due())
    broken.clear()
    asyncio.run(sim.run_until_settled(delivery_ids=[bad]))
    delivered = sim.delivery(bad)
    assert delivered.state is State.DELIVERED
    assert delivered.attempt == 1
    [attempt] = sim.attempts(bad)
    assert attempt.started_at == T0 + RELEASE_DELAY


def test_a_release_never_resets_a_newer_claim(make_sim: MakeSim) -> None:
    sim = make_sim()
    did = sim.publish(endpoint_id="partner", deadline_at=LATER)
    worker = sim.worker("w1")
    [lease] = worker.claim()
    sim.advance(sim.policy.lease_duration)
    [newer] = sim.worker("w2").claim()
    assert newer.token > lease.token
    from sender_sim.worker import Thrown

    assert worker.release([Thrown(lease, Broken("late"), sim.now())]) == [False]
    after = sim.delivery(did)
    assert after.state is State.LEASED
    assert after.lease_owner == "w2"
    assert sim.ledger(did)[-1].cause == "release_refused"
