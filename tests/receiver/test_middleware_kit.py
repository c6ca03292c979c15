"""Test kit for the middleware: signed requests and a scripted handler under Starlette or FastAPI.

The handler's answer is chosen by the delivered JSON body's ``"answer"`` field (a status code or
``"raise"``); every call is recorded, and with ``"effect": true`` it adds transactional work that
appends the event id to the MemoryInbox store's ``effects`` list.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

import httpx
from fastapi import Depends, FastAPI
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from receiver.inbox.contract import Inbox
from receiver.middleware import Delivery, HookproofMiddleware, InboxSource, hookproof_delivery
from receiver.signing import Secret, Verifier

NOW_S = 1_767_225_600  # 2026-01-01T00:00:00Z
SECRET = Secret("whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
OTHER_SECRET = Secret("whsec_" + "c2VjcmV0LW9mLWFub3RoZXItc2VuZGVyIQ==")
FRAMEWORKS = ("starlette", "fastapi")

T = TypeVar("T")


def run(coroutine: Awaitable[T]) -> T:
    async def main() -> T:
        return await coroutine

    return asyncio.run(main())


def verifier(now: int = NOW_S, secrets: tuple[Secret, ...] = (SECRET,)) -> Verifier:
    return Verifier(list(secrets), clock=lambda: float(now))


def signed(
    body: bytes,
    event_id: str,
    *,
    timestamp: int = NOW_S,
    secret: Secret = SECRET,
) -> dict[str, str]:
    return verifier(secrets=(secret,)).sign(body, event_id=event_id, timestamp=timestamp)


def payload(answer: int | str = 200, *, effect: bool = True, **extra: Any) -> bytes:
    return json.dumps({"type": "test", "answer": answer, "effect": effect, **extra}).encode()


@dataclass
class Recorder:
    calls: list[str] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)


def _effect(event_id: str) -> Callable[[Any], None]:
    def work(store: Any) -> None:
        store.setdefault("effects", []).append(event_id)

    return work


async def _respond(delivery: Delivery, raw: bytes, recorder: Recorder) -> Response:
    recorder.calls.append(delivery.event_id)
    recorder.bodies.append(raw)
    document = json.loads(raw)
    answer = document["answer"]
    if answer == "raise":
        raise RuntimeError("the handler broke")
    if document.get("effect"):
        delivery.add_work(_effect(delivery.event_id))
    if document.get("failing_work"):
        delivery.add_work(_failing_work)
    return JSONResponse({"handled": delivery.event_id}, status_code=int(answer))


def _failing_work(store: Any) -> None:
    store["half-written"] = True
    raise RuntimeError("the transactional work failed")


def build_app(
    framework: str,
    inbox: InboxSource,
    recorder: Recorder,
    *,
    max_body: int = 1024 * 1024,
    probe_token: str | None = None,
    now: int = NOW_S,
) -> Any:
    options: dict[str, Any] = {
        "verifier": verifier(now),
        "inbox": inbox,
        "max_body": max_body,
        "probe_token": probe_token,
    }
    if framework == "starlette":

        async def handler(request: Request) -> Response:
            return await _respond(hookproof_delivery(request), await request.body(), recorder)

        async def plain(request: Request) -> Response:
            return JSONResponse({"plain": True})

        return Starlette(
            routes=[
                Route("/webhooks", handler, methods=["POST"]),
                Route("/plain", plain, methods=["GET", "POST"]),
            ],
            middleware=[Middleware(HookproofMiddleware, **options)],
        )
    api = FastAPI()
    api.add_middleware(HookproofMiddleware, **options)

    @api.post("/webhooks")
    async def webhook(
        request: Request, delivery: Annotated[Delivery, Depends(hookproof_delivery)]
    ) -> Response:
        return await _respond(delivery, await request.body(), recorder)

    @api.get("/plain")
    async def plain_get() -> dict[str, bool]:
        return {"plain": True}

    return api


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver")


async def post(
    app: Any, body: bytes, headers: dict[str, str], path: str = "/webhooks"
) -> httpx.Response:
    async with client(app) as http:
        return await http.post(path, content=body, headers=headers)


def effects_of(inbox: Inbox) -> list[str]:
    store = getattr(inbox, "store", {})
    return list(store.get("effects", []))
