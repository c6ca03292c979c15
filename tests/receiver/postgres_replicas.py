"""Receiver replicas on one PostgreSQL inbox, a bounded load generator, and what the database shows.

A :class:`Cluster` is one fresh schema plus ``hookproof receiver --db postgresql://…`` processes
(real uvicorn on loopback ports, started with :mod:`tests.support.processes`) that share it. The
load generator (:func:`burst`) sends signed copies of events concurrently to several replicas
with httpx, bounded by a semaphore, and records every answer (or the lack of one, when a replica
was killed under it). :func:`deliver_until_2xx` is the sender's retry loop: it honours
``Retry-After`` in real time, because the receivers' leases run on their wall clocks.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg
from psycopg import sql

from receiver.signing import Secret, Verifier
from tests.receiver.inbox.postgres_backend import fresh_schema, inbox_location
from tests.support.processes import LOOPBACK, ServerProcess, free_port, hookproof_argv

__all__ = [
    "PROBE_TOKEN",
    "SECRET",
    "Answer",
    "Cluster",
    "application_name",
    "burst",
    "client",
    "cluster",
    "deliver_until_2xx",
    "signed",
]

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
PROBE_TOKEN = "replica-probe-token"
_VERIFIER = Verifier([Secret(SECRET)])


def signed(event_id: str) -> tuple[bytes, dict[str, str]]:
    """The event's fixed body and freshly timestamped Standard Webhooks headers."""
    body = json.dumps(
        {"type": "renewal.reminder_due", "data": {"renewal_id": f"ren_{event_id}"}},
        separators=(",", ":"),
    ).encode()
    headers = _VERIFIER.sign(body, event_id=event_id, timestamp=int(time.time()))
    return body, {**headers, "content-type": "application/json"}


@dataclass(frozen=True)
class Answer:
    """One request's outcome: ``status`` is ``None`` when no answer came (the replica died)."""

    event_id: str
    url: str
    status: int | None
    retry_after: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@dataclass
class Cluster:
    """One schema and the replica processes serving it."""

    dsn: str
    schema: str
    lease_s: int = 1
    pool_max_size: int = 8
    replicas: list[ServerProcess] = field(default_factory=list)
    processes: ExitStack = field(default_factory=ExitStack)

    def location(self, application_name: str) -> str:
        return inbox_location(
            self.dsn,
            self.schema,
            application_name=application_name,
            pool_max_size=self.pool_max_size,
            pool_timeout=2,
        )

    def start(self, application_name: str, *extra: str) -> ServerProcess:
        """Start one replica (``hookproof receiver``) and wait until it answers /healthz."""
        port = free_port()
        argv = hookproof_argv(
            "receiver",
            "--port",
            str(port),
            "--db",
            self.location(application_name),
            "--lease",
            str(self.lease_s),
            "--probe-token",
            PROBE_TOKEN,
            "--log-level",
            "warning",
            *extra,
        )
        process = ServerProcess.start(
            argv,
            env={"HOOKPROOF_SECRET": SECRET},
            ready_url=f"http://{LOOPBACK}:{port}/healthz",
            timeout=60.0,
        )
        self.replicas.append(self.processes.enter_context(process))
        return process

    def url(self, process: ServerProcess) -> str:
        return f"{process.base_url}/webhooks"

    def rows(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run ``query`` with the cluster's schema first on the search path."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
            cursor = conn.execute(query.encode(), params or None)
            return cursor.fetchall() if cursor.description else []

    def records(self) -> dict[str, tuple[str, int, int]]:
        """``event_id → (state, token, effects)`` of every inbox record."""
        rows = self.rows("SELECT event_id, state, token, effects FROM hookproof_inbox")
        return {event_id: (state, token, effects) for event_id, state, token, effects in rows}

    def reminders(self) -> dict[str, int]:
        """``event_id → how many demo effects (reminder rows)`` it produced."""
        rows = self.rows(
            "SELECT event_id, count(*) FROM hookproof_renewal_reminders GROUP BY event_id"
        )
        return {event_id: int(count) for event_id, count in rows}


@contextmanager
def cluster(dsn: str, *, lease_s: int = 1, pool_max_size: int = 8) -> Iterator[Cluster]:
    """A fresh cluster; every replica is killed and the schema dropped at the end."""
    group = Cluster(dsn, fresh_schema("replicas"), lease_s=lease_s, pool_max_size=pool_max_size)
    try:
        with group.processes:
            yield group
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(group.schema))
            )


def application_name(role: str) -> str:
    """A unique application_name, so only this test's sessions are ever terminated."""
    return f"hp-{role}-{uuid.uuid4().hex[:8]}"


async def _post(
    client: httpx.AsyncClient, url: str, event_id: str, gate: asyncio.Semaphore
) -> Answer:
    body, headers = signed(event_id)
    async with gate:
        try:
            response = await client.post(url, content=body, headers=headers)
        except httpx.TransportError:
            return Answer(event_id, url, None)
    return Answer(event_id, url, response.status_code, response.headers.get("retry-after"))


async def burst(
    client: httpx.AsyncClient,
    urls: Sequence[str],
    event_ids: Sequence[str],
    *,
    copies: int,
    concurrency: int = 24,
) -> list[Answer]:
    """``copies`` concurrent copies of every event, spread round-robin over ``urls``."""
    gate = asyncio.Semaphore(concurrency)
    requests = [
        _post(client, urls[(n + i) % len(urls)], event_id, gate)
        for i, event_id in enumerate(event_ids)
        for n in range(copies)
    ]
    return list(await asyncio.gather(*requests))


async def deliver_until_2xx(
    client: httpx.AsyncClient,
    urls: Sequence[str],
    event_ids: Sequence[str],
    *,
    max_attempts: int = 30,
) -> dict[str, list[Answer]]:
    """Resend each event (rotating over ``urls``) until it is answered 2xx; every answer kept.

    Raises AssertionError on an answer that is neither 2xx nor a 503 with ``Retry-After``.
    """
    gate = asyncio.Semaphore(16)

    async def until_ok(event_id: str) -> list[Answer]:
        answers: list[Answer] = []
        for attempt in range(max_attempts):
            answer = await _post(client, urls[attempt % len(urls)], event_id, gate)
            answers.append(answer)
            if answer.ok:
                return answers
            assert answer.status == 503, answer
            assert answer.retry_after is not None, answer
            # real-time: the replicas' leases expire on their wall clocks.
            await asyncio.sleep(min(float(answer.retry_after), 1.0))
        raise AssertionError(f"{event_id} was never answered 2xx: {answers}")

    results = await asyncio.gather(*(until_ok(event_id) for event_id in event_ids))
    return dict(zip(event_ids, results, strict=True))


def client() -> httpx.AsyncClient:
    """The load generator's client: loopback only, generous pool, short timeouts."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(15.0, connect=5.0),
        limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
    )
