"""Seed 000's worked example, end to end on the virtual clock, as an executable story.

Deadline 10:00 UTC. The request starting 09:57:40 times out at 09:57:50 although the receiver had
committed. Jitter gives (just under) 100 s and the budget is 30 s, so the retry is scheduled for
09:59:30; it ends ambiguously at 09:59:45 and the item dead-letters as ``deadline_exhausted``. The
owner extends only ``ren_18427`` to 11:00; the operator filters the DLQ by business key and reason,
redrives once with actor and reason; a second identical redrive is refused; the reference receiver
(in process) answers 2xx without a second effect; ``explain`` tells every transition.

A note on the numbers: the seed's 09:59:30 + 30 s lands *exactly* on 10:00:00, and DESIGN's rule
(``next + budget < deadline``; equality dead-letters) refuses that — as the seed's own code
(``>=``) does. So the scripted jitter draw is 1 µs short of 100 s (09:59:29.999999), and
:func:`test_exactly_100_seconds_would_be_refused` pins the boundary.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from receiver.app import ReceiverSettings, create_app
from receiver.inbox.memory import MemoryInbox
from sender_sim import (
    DeadLetterReason,
    FullJitter,
    Policy,
    RedriveRefused,
    RedriveScope,
    Simulator,
    SQLiteStore,
    State,
    VirtualClock,
)
from tests.sender_sim.conftest import SECRET, FixedRandom

DAY = datetime(2026, 8, 13, tzinfo=UTC)


def at(hms: str) -> datetime:
    h, m, s = hms.split(":")
    sec, _, frac = s.partition(".")
    return DAY.replace(
        hour=int(h), minute=int(m), second=int(sec), microsecond=int(frac.ljust(6, "0") or 0)
    )


POLICY = Policy(
    backoff=FullJitter(base=timedelta(seconds=120), cap=timedelta(seconds=900)),
    expected_attempt_time=timedelta(seconds=30),
    timeout=timedelta(seconds=10),
)
TOKEN = "probe-token-story"


class LostAnswers(httpx.AsyncBaseTransport):
    """The reference receiver in process; for scripted attempts the answer is lost on the way
    back: simulated time runs to the scripted instant, then the client times out."""

    def __init__(self, app: object, clock: VirtualClock, lost_until: list[datetime]) -> None:
        self.inner = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        self.clock = clock
        self.lost_until = lost_until
        self.seen: list[tuple[httpx.Headers, bytes, int]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        await response.aread()
        if request.url.path == "/webhooks":
            self.seen.append((request.headers, request.content, response.status_code))
            if self.lost_until:
                self.clock.set(self.lost_until.pop(0))
                raise httpx.ReadTimeout("timed out waiting for the response", request=request)
        return response


def _story_sim(draws: tuple[int, ...]) -> tuple[Simulator, LostAnswers, object]:
    clock = VirtualClock(at("09:50:00"))
    app = create_app(ReceiverSettings(secrets=[SECRET], probe_token=TOKEN), inbox=MemoryInbox())
    transport = LostAnswers(app, clock, [at("09:57:50"), at("09:59:45")])
    client = httpx.AsyncClient(transport=transport, base_url="http://receiver.test")
    sim = Simulator(
        SQLiteStore(":memory:"), clock=clock, policy=POLICY, client=client, rng=FixedRandom(*draws)
    )
    sim.add_endpoint("marketplace", "http://receiver.test/webhooks", [SECRET])
    return sim, transport, app


def _publish_reminder(sim: Simulator) -> str:
    return sim.publish(
        endpoint_id="marketplace",
        event_type="renewal.reminder",
        data={"renewal_id": "ren_18427", "buyer": "b_77"},
        business_key="ren_18427",
        deadline_at=at("10:00:00"),
        first_attempt_at=at("09:57:40"),
        occurred_at=at("09:40:00"),
        delivery_id="del_01JMARKET42",
        event_id="evt_renewal_18427",
    )


def test_the_seed_story_end_to_end() -> None:
    sim, transport, app = _story_sim((99_999_999, 1_000_000))

    async def story() -> dict[str, object]:
        async with app.router.lifespan_context(app):  # type: ignore[attr-defined]
            did = _publish_reminder(sim)
            other = sim.publish(  # another renewal whose window also closed: it must stay put
                endpoint_id="marketplace",
                event_type="renewal.reminder",
                data={"renewal_id": "ren_20001"},
                business_key="ren_20001",
                deadline_at=at("09:58:00"),
                first_attempt_at=at("09:57:40"),
                delivery_id="del_other",
            )
            assert sim.delivery(other).reason is DeadLetterReason.DEADLINE_EXHAUSTED

            # automatic delivery: 09:57:40 ambiguous timeout, retry 09:59:29.999999, ambiguous again
            await sim.run_until_settled(delivery_ids=[did])
            first, second = sim.attempts(did)
            assert (first.started_at, first.ended_at) == (at("09:57:40"), at("09:57:50"))
            assert first.kind.value == "timeout"
            assert (second.started_at, second.ended_at) == (
                at("09:59:29.999999"),
                at("09:59:45"),
            )
            dead = sim.delivery(did)
            assert (dead.state, dead.reason) == (
                State.DEAD_LETTER,
                DeadLetterReason.DEADLINE_EXHAUSTED,
            )
            metrics = sim.metrics()
            assert metrics.dlq_by_reason == {"deadline_exhausted": 2}
            assert metrics.attempts_by_classification == {"timeout": 2}

            # the business owner extends only ren_18427 to 11:00; the operator acts at 10:05
            sim.set_time(at("10:05:00"))
            assert [d.delivery_id for d in sim.dlq(reason="deadline_exhausted")] == [did, other]
            chosen = sim.dlq(business_key="ren_18427", reason="deadline_exhausted")
            assert [d.delivery_id for d in chosen] == [did]
            scope = RedriveScope(
                business_key="ren_18427", reason=DeadLetterReason.DEADLINE_EXHAUSTED
            )
            result = sim.redrive(
                actor="ops:maria",
                reason="owner extended ren_18427 to 11:00 (ticket OPS-311)",
                deadline_at=at("11:00:00"),
                scope=scope,
            )
            assert result.delivery_ids == (did,)
            with pytest.raises(RedriveRefused) as refused:
                sim.redrive(
                    actor="ops:maria",
                    reason="owner extended ren_18427 to 11:00 (ticket OPS-311)",
                    deadline_at=at("11:00:00"),
                    scope=scope,
                )
            assert refused.value.codes == {"not_dead_letter"}

            await sim.run_until_settled(delivery_ids=[did])
            probe = await sim.client.get(
                "/_hookproof/events/evt_renewal_18427",
                headers={"authorization": f"Bearer {TOKEN}"},
            )
            return {"did": did, "other": other, "probe": probe.json(), "refused": refused.value}

    out = asyncio.run(story())
    did = str(out["did"])
    delivered = sim.delivery(did)
    assert delivered.state is State.DELIVERED
    assert delivered.attempt == 3
    assert delivered.max_attempts == POLICY.max_attempts
    assert sim.delivery(str(out["other"])).state is State.DEAD_LETTER

    # the receiver: three deliveries of one event, one effect
    assert out["probe"] == {
        "event_id": "evt_renewal_18427",
        "status": "committed",
        "effects": 1,
        "deliveries": 3,
    }
    assert [status for _, _, status in transport.seen] == [200, 200, 200]
    headers = [h for h, _, _ in transport.seen]
    assert {h["webhook-id"] for h in headers} == {"evt_renewal_18427"}
    assert {h["hookproof-delivery-id"] for h in headers} == {"del_01JMARKET42"}
    assert [h["hookproof-attempt"] for h in headers] == ["1", "2", "3"]
    # the deadline rides along in the receiver's (the wire's, real) time: as far from the
    # attempt's signed timestamp as the delivery's deadline was from the simulated attempt
    attempts = sim.attempts(did)
    deadlines = [at("10:00:00"), at("10:00:00"), at("11:00:00")]
    for header, attempt, deadline in zip(headers, attempts, deadlines, strict=True):
        sent = datetime.fromtimestamp(int(header["webhook-timestamp"]), UTC)
        shown = datetime.fromisoformat(header["hookproof-deadline"]) - sent
        assert abs(shown - (deadline - attempt.started_at)) < timedelta(seconds=2)
    assert len({body for _, body, _ in transport.seen}) == 1  # byte-identical every time

    decisions = sim.decisions()
    assert [(d.result, d.actor) for d in decisions] == [
        ("queued", "ops:maria"),
        ("refused", "ops:maria"),
    ]
    assert sim.metrics().redrive_outcomes == {"queued": 1, "refused": 1}

    story = sim.explain(did)
    expected_lines = [
        "published under policy strict; first attempt due 2026-08-13T09:57:40.000000Z",
        "2026-08-13T09:57:40.000000Z  [worker-1]",
        "leased to worker-1 (fencing token 1",
        "2026-08-13T09:57:50.000000Z  [worker-1]",
        "attempt 1 by worker-1 ended with timeout",
        "ambiguous: the receiver may have committed it",
        "retry scheduled for 2026-08-13T09:59:29.999999Z",
        "it would end by 2026-08-13T09:59:59.999999Z, 0.000001s before the deadline",
        "attempt 2 starts",
        "2026-08-13T09:59:45.000000Z  [worker-1]",
        "attempt 2 by worker-1 ended with timeout",
        "would end by 2026-08-13T10:00:16.000000Z, not before the deadline "
        "2026-08-13T10:00:00.000000Z -> dead letter (deadline_exhausted)",
        'REDRIVE by ops:maria (decision 1), reason: "owner extended ren_18427 to 11:00',
        "deadline 2026-08-13T10:00:00.000000Z -> 2026-08-13T11:00:00.000000Z",
        "redrive REFUSED (decision 2) requested by ops:maria",
        "is scheduled, not a dead letter (already redriven 1x)",
        "attempt 3 starts",
        "attempt 3 by worker-1 answered HTTP 200, classified success -> delivered",
        "#1  2026-08-13T09:57:40.000000Z -> 2026-08-13T09:57:50.000000Z",
        "#3  2026-08-13T10:05:00.000000Z -> 2026-08-13T10:05:00.000000Z",
        "decision 1 at 2026-08-13T10:05:00.000000Z by ops:maria: queued",
        "decision 2 at 2026-08-13T10:05:00.000000Z by ops:maria: refused",
        "state:     delivered; 3 attempt(s)",
    ]
    missing = [line for line in expected_lines if line not in story]
    assert missing == [], story
    # every state change in the ledger appears as one line of the story, in order
    changes = [r for r in sim.ledger(did) if r.is_state_change]
    assert [(r.from_state, r.to_state) for r in changes] == [
        (None, State.SCHEDULED),
        (State.SCHEDULED, State.LEASED),
        (State.LEASED, State.SCHEDULED),
        (State.SCHEDULED, State.LEASED),
        (State.LEASED, State.DEAD_LETTER),
        (State.DEAD_LETTER, State.SCHEDULED),
        (State.SCHEDULED, State.LEASED),
        (State.LEASED, State.DELIVERED),
    ]
    assert len(story.split("Story:")[1].split("Attempts:")[0].strip().splitlines()) == len(
        sim.ledger(did)
    )


def test_exactly_100_seconds_would_be_refused() -> None:
    """The seed's prose numbers sit on the boundary: 09:59:30 + 30 s == 10:00:00 dead-letters."""
    sim, _, app = _story_sim((100_000_000,))

    async def run() -> None:
        async with app.router.lifespan_context(app):  # type: ignore[attr-defined]
            did = _publish_reminder(sim)
            await sim.run_until_settled(delivery_ids=[did])

    asyncio.run(run())
    delivery = sim.delivery("del_01JMARKET42")
    assert (delivery.state, delivery.reason) == (
        State.DEAD_LETTER,
        DeadLetterReason.DEADLINE_EXHAUSTED,
    )
    assert delivery.attempt == 1
    last = sim.ledger("del_01JMARKET42")[-1]
    assert last.details["next_at"] == "2026-08-13T09:59:30.000000Z"
    assert last.details["would_end"] == "2026-08-13T10:00:00.000000Z"
