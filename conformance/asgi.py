"""Running an ASGI app in process for the R harness and the pytest plugin: its lifespan
(startup/shutdown, which opens and closes a receiver's inbox) around an ``httpx.AsyncClient``
whose transport calls the app directly — no server, no socket."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import httpx

from conformance.exceptions import HarnessError, UsageError
from sender_sim.sender_client import sender_client

__all__ = ["app_client", "import_app", "lifespan"]

Message = MutableMapping[str, Any]


def import_app(spec: str) -> Any:
    """The object named by ``module:attribute`` (called if it is a factory taking no argument)."""
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        raise UsageError(f"an app is named 'module:attribute', got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise UsageError(f"cannot import {module_name!r}: {error}") from None
    except Exception as error:  # the partner's module raised while importing: still one line
        raise UsageError(
            f"importing {module_name!r} raised {error.__class__.__name__}: {error}"
        ) from None
    try:
        app = getattr(module, attribute)
    except AttributeError:
        raise UsageError(f"module {module_name!r} has no attribute {attribute!r}") from None
    return app


@asynccontextmanager
async def lifespan(app: Any) -> AsyncIterator[None]:
    """Run the app's lifespan protocol; apps that do not speak it are used as they are."""
    inbound: asyncio.Queue[Message] = asyncio.Queue()
    outbound: asyncio.Queue[Message] = asyncio.Queue()

    async def receive() -> Message:
        return await inbound.get()

    async def send(message: Message) -> None:
        await outbound.put(message)

    scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
    task = asyncio.ensure_future(app(scope, receive, send))
    await inbound.put({"type": "lifespan.startup"})
    started = asyncio.ensure_future(outbound.get())
    await asyncio.wait({task, started}, return_when=asyncio.FIRST_COMPLETED)
    if not started.done():  # the app returned (or raised) without speaking lifespan
        started.cancel()
        if task.exception() is not None:
            pass  # lifespan unsupported: fine
        yield
        return
    message = started.result()
    if message["type"] == "lifespan.startup.failed":
        raise HarnessError(f"the app failed to start: {message.get('message', '')}")
    try:
        yield
    finally:
        await inbound.put({"type": "lifespan.shutdown"})
        await outbound.get()
        await task


@asynccontextmanager
async def app_client(
    app: Any, base_url: str = "http://hookproof.test"
) -> AsyncIterator[httpx.AsyncClient]:
    """An ``httpx.AsyncClient`` bound to ``app`` in process, inside its lifespan."""
    async with lifespan(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with sender_client(transport=transport, base_url=base_url) as client:
            yield client
