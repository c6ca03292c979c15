"""A database outage under load: two replicas whose PostgreSQL sessions are killed again and again.

The shared server is never stopped: the outage is ``pg_terminate_backend`` of every session of the
replicas (and only theirs: each test names its sessions with a unique ``application_name``) in a
loop while a burst is under way. The sender must see 503 with ``Retry-After`` during the outage and
never a 2xx for an event that is not committed; once the killing stops, every event is delivered
with exactly one effect and new events are answered 2xx at the first attempt.
"""

from __future__ import annotations

import asyncio

import pytest

from receiver.inbox.postgres import DEFAULT_CHECK_IDLE_AFTER_S
from tests.receiver.inbox.postgres_backend import terminate_backends
from tests.receiver.postgres_replicas import (
    Answer,
    application_name,
    burst,
    client,
    cluster,
    deliver_until_2xx,
)

pytestmark = [pytest.mark.postgres, pytest.mark.subprocess]


OUTAGE_S = 1.0
"""How long the sessions are killed again and again (real time: the replicas are processes)."""


def test_terminated_sessions_under_load_give_503s_never_an_uncommitted_2xx_then_recover(
    postgres_dsn: str,
) -> None:
    with cluster(postgres_dsn) as group:
        names = [application_name("outage-a"), application_name("outage-b")]
        replicas = [group.start(name) for name in names]
        urls = [group.url(process) for process in replicas]
        events = [f"evt_o{n}" for n in range(200)]
        fresh = [f"evt_after{n}" for n in range(40)]
        terminated = 0

        async def outage() -> None:
            nonlocal terminated
            ends = asyncio.get_running_loop().time() + OUTAGE_S
            while asyncio.get_running_loop().time() < ends:
                for name in names:
                    terminated += await terminate_backends(postgres_dsn, name)
                await asyncio.sleep(0.05)  # real-time: let the pools reconnect, then kill again

        async def scenario() -> tuple[list[Answer], dict[str, list[Answer]], list[Answer]]:
            async with client() as http:
                killing = asyncio.ensure_future(outage())
                during = await burst(http, urls, events, copies=2, concurrency=16)
                await killing
                retried = await deliver_until_2xx(http, urls, events)
                # A connection killed while idle in a pool is found dead when it is next used or,
                # once idle for DEFAULT_CHECK_IDLE_AFTER_S, checked before use: "recovered" means
                # after that, so the fresh events must then go through at the first attempt.
                await asyncio.sleep(DEFAULT_CHECK_IDLE_AFTER_S * 1.5)  # real-time: the idle check
                after = await burst(http, urls, fresh, copies=1)
            return during, retried, after

        during, retried, after = asyncio.run(scenario())
        assert terminated > 0
        for answer in during + [a for answers in retried.values() for a in answers]:
            assert answer.status is not None, answer  # the replicas themselves never went away
            assert answer.ok or (answer.status == 503 and answer.retry_after), answer
        assert any(a.status == 503 for a in during), "the outage produced no 503"
        # No 2xx for an uncommitted event: everything ever acknowledged is committed, once.
        records, reminders = group.records(), group.reminders()
        acknowledged = {a.event_id for a in during if a.ok}
        for event_id in acknowledged | set(events):
            assert records[event_id][0] == "committed", event_id
            assert reminders.get(event_id) == 1, event_id
        # Full recovery: new events go through at the first attempt.
        assert [a.status for a in after] == [200] * len(fresh), after
        reminders = group.reminders()
        assert {event_id: reminders.get(event_id) for event_id in fresh} == dict.fromkeys(fresh, 1)
        for process in replicas:
            assert process.returncode is None, process.output()
            # Quiet logs: the outage is one line per failed delivery or release, no traceback.
            assert "Traceback" not in process.output(), process.output()[-3000:]
