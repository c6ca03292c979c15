"""Crash durability: ``kill -9`` the receiver at random moments under load, restart it on the same
SQLite file, and check the database directly.

Guarantees (DESIGN §8): every event ever answered 2xx is committed in the inbox, and no event's
effect was applied twice; in transactional mode the reminder rows and the committed records are
exactly the same set of events (they commit together or not at all).
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import time
from pathlib import Path

import httpx
import pytest

from receiver.demo_effect import TABLE
from receiver.signing import Secret, Verifier
from tests.support.processes import LOOPBACK, ServerProcess, free_port, hookproof_argv

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
CRASHES = 4
CONCURRENCY = 12

pytestmark = pytest.mark.subprocess


def _start(db: Path) -> ServerProcess:
    port = free_port()
    argv = hookproof_argv(
        "receiver", "--port", str(port), "--db", str(db), "--secret", SECRET, "--lease", "2"
    )
    argv += ["--log-level", "warning"]
    return ServerProcess.start(argv, ready_url=f"http://{LOOPBACK}:{port}/healthz")


class Load:
    """A stream of distinct and duplicate deliveries; remembers which events were answered 2xx."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.sent: list[str] = []
        self.acknowledged: set[str] = set()
        self.answers: dict[int, int] = {}
        self.signer = Verifier([Secret(SECRET)])

    def next_event(self) -> str:
        if self.sent and self.random.random() < 0.4:
            return self.random.choice(self.sent)  # a duplicate (maybe of an unanswered one)
        event_id = f"evt_{len(self.sent):05d}"
        self.sent.append(event_id)
        return event_id

    async def deliver(self, http: httpx.AsyncClient, url: str, event_id: str) -> None:
        body = json.dumps(
            {"type": "renewal.reminder_due", "data": {"renewal_id": f"ren_{event_id}"}}
        ).encode()
        headers = self.signer.sign(body, event_id=event_id, timestamp=int(time.time()))
        try:
            response = await http.post(url, content=body, headers=headers)
        except httpx.TransportError:
            return  # the process died under this request: no answer, no promise
        self.answers[response.status_code] = self.answers.get(response.status_code, 0) + 1
        assert response.status_code in (200, 503), response.text
        if response.status_code == 200:
            self.acknowledged.add(event_id)

    async def run_until_killed(self, process: ServerProcess, kill_after: int) -> None:
        """Keep ``CONCURRENCY`` requests in flight; SIGKILL after ``kill_after`` answers."""
        url = f"{process.base_url}/webhooks"
        answered = 0
        limits = httpx.Limits(max_connections=CONCURRENCY)
        async with httpx.AsyncClient(limits=limits, timeout=10) as http:
            pending = {
                asyncio.create_task(self.deliver(http, url, self.next_event()))
                for _ in range(CONCURRENCY)
            }
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()
                    answered += 1
                if answered >= kill_after and process.returncode is None:
                    process.kill()  # mid-stream: other requests are still in flight
                if process.returncode is None:
                    pending |= {
                        asyncio.create_task(self.deliver(http, url, self.next_event()))
                        for _ in done
                    }


def test_kill_9_under_load_loses_no_acknowledged_event_and_applies_none_twice(
    tmp_path: Path,
) -> None:
    db = tmp_path / "inbox.sqlite"
    load = Load(seed=20260101)
    for _ in range(CRASHES):
        process = _start(db)
        try:
            asyncio.run(load.run_until_killed(process, kill_after=load.random.randint(20, 120)))
        finally:
            process.kill()
            process.close()
        assert process.returncode == -9
    # One last clean life: the duplicates of acknowledged events are still answered 2xx.
    with _start(db) as process:
        replay = sorted(load.acknowledged)[:20]
        asyncio.run(_replay(load, process, replay))
    assert load.acknowledged, load.answers
    assert load.answers.get(200, 0) > CRASHES * 10

    with sqlite3.connect(db) as conn:
        states = dict(conn.execute("SELECT event_id, state FROM hookproof_inbox").fetchall())
        doubled = conn.execute(
            f"SELECT event_id, count(*) FROM {TABLE} GROUP BY event_id HAVING count(*) > 1"
        ).fetchall()
        with_effect = {row[0] for row in conn.execute(f"SELECT event_id FROM {TABLE}")}
    lost = sorted(event for event in load.acknowledged if states.get(event) != "committed")
    assert lost == [], f"acknowledged but not committed: {lost}"
    assert doubled == [], f"effects applied twice: {doubled}"
    committed = {event for event, state in states.items() if state == "committed"}
    assert with_effect == committed  # transactional: the record and the effect commit together


async def _replay(load: Load, process: ServerProcess, events: list[str]) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        url = f"{process.base_url}/webhooks"
        before = len(load.acknowledged)
        for event_id in events:
            await load.deliver(http, url, event_id)
        assert len(load.acknowledged) == before  # no new ones: these were acknowledged already
