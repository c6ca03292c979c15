"""N concurrent copies of one event over real HTTP on loopback (uvicorn in a thread): one effect.

Every answer is 2xx or 503 with ``Retry-After``; after the 503s are retried, all are 2xx.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from pathlib import Path

import anyio.to_thread
import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from receiver.app import ReceiverSettings, create_app
from receiver.demo_effect import TABLE
from receiver.inbox.sqlite import SqliteInbox
from receiver.middleware import HookproofMiddleware, hookproof_delivery
from receiver.server import running_server
from receiver.signing import Secret, Verifier

SECRET = Secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
COPIES = 24

pytestmark = pytest.mark.subprocess


def _copies(event_id: str) -> tuple[bytes, list[dict[str, str]]]:
    body = json.dumps({"type": "renewal.reminder_due", "data": {"renewal_id": "ren_1"}}).encode()
    now = int(time.time())
    signer = Verifier([SECRET])
    # Each copy is signed afresh, as a sender's retries are.
    return body, [
        signer.sign(body, event_id=event_id, timestamp=now - i % 3) for i in range(COPIES)
    ]


def _assert_first_round(responses: list[httpx.Response]) -> None:
    for response in responses:
        assert response.status_code == 200 or (
            response.status_code == 503 and int(response.headers["retry-after"]) >= 1
        ), (response.status_code, response.text)


async def _retry_until_2xx(
    http: httpx.AsyncClient, url: str, body: bytes, headers: dict[str, str]
) -> httpx.Response:
    for _ in range(50):
        response = await http.post(url, content=body, headers=headers)
        if response.status_code != 503:
            return response
    raise AssertionError("still 503 after 50 retries")


def test_concurrent_copies_through_the_reference_app(tmp_path: Path) -> None:
    db = str(tmp_path / "inbox.sqlite")
    app = create_app(ReceiverSettings(secrets=[SECRET.value], db=db))
    body, signed = _copies("evt_storm")

    async def storm(base_url: str) -> tuple[list[httpx.Response], list[httpx.Response]]:
        limits = httpx.Limits(max_connections=COPIES)
        async with httpx.AsyncClient(limits=limits, timeout=30) as http:
            url = f"{base_url}/webhooks"
            first = await asyncio.gather(
                *(http.post(url, content=body, headers=headers) for headers in signed)
            )
            retried = await asyncio.gather(
                *(
                    _retry_until_2xx(http, url, body, headers)
                    for response, headers in zip(first, signed, strict=True)
                    if response.status_code == 503
                )
            )
        return list(first), list(retried)

    with running_server(app) as base_url:
        first, retried = asyncio.run(storm(base_url))
    _assert_first_round(first)
    assert all(response.status_code == 200 for response in retried)
    with sqlite3.connect(db) as conn:
        (effects,) = conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
        (deliveries,) = conn.execute("SELECT deliveries FROM hookproof_inbox").fetchone()
    assert effects == 1
    assert deliveries == COPIES + len(retried)


def test_copies_arriving_while_the_first_is_in_flight_get_503_then_2xx(tmp_path: Path) -> None:
    gate = threading.Event()
    calls: list[str] = []

    async def handler(request: Request) -> Response:
        delivery = hookproof_delivery(request)
        calls.append(delivery.event_id)
        await anyio.to_thread.run_sync(gate.wait)  # held until every other copy was answered
        delivery.add_work(lambda conn: conn.execute("INSERT INTO effects VALUES (?)", ("x",)))
        return JSONResponse({"ok": True})

    db = str(tmp_path / "inbox.sqlite")
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE effects (event_id TEXT)")
    inbox = SqliteInbox(db)
    app = Starlette(
        routes=[Route("/webhooks", handler, methods=["POST"])],
        middleware=[Middleware(HookproofMiddleware, verifier=Verifier([SECRET]), inbox=inbox)],
    )
    body, signed = _copies("evt_held")

    async def storm(base_url: str) -> tuple[list[httpx.Response], list[httpx.Response]]:
        url = f"{base_url}/webhooks"
        limits = httpx.Limits(max_connections=COPIES)
        async with httpx.AsyncClient(limits=limits, timeout=30) as http:
            tasks = [asyncio.create_task(http.post(url, content=body, headers=h)) for h in signed]
            early: list[httpx.Response] = []
            for finished in asyncio.as_completed(tasks):
                early.append(await finished)
                if len(early) == COPIES - 1:
                    break
            gate.set()
            first = [await task for task in tasks]
            retried = await asyncio.gather(
                *(
                    http.post(url, content=body, headers=h)
                    for r, h in zip(first, signed, strict=True)
                    if r.status_code == 503
                )
            )
        return early, list(retried)

    try:
        with running_server(app) as base_url:
            early, retried = asyncio.run(storm(base_url))
    finally:
        gate.set()
        asyncio.run(inbox.close())
    assert [r.status_code for r in early] == [503] * (COPIES - 1)
    assert all(int(r.headers["retry-after"]) >= 1 for r in early)
    assert [r.status_code for r in retried] == [200] * (COPIES - 1)
    assert all(r.json()["duplicate"] is True for r in retried)
    assert calls == ["evt_held"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM effects").fetchone() == (1,)
