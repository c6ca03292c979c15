"""The scripted receiver of the S harness: an in-process stand-in that answers as told.

Each event may be given a script — a queue of answers such as ``{"status": 503}``,
``{"status": 429, "retry_after": "120"}``, ``{"error": "timeout"}`` (or ``dns``, ``tls``,
``connect``), ``{"error": "exception"}`` (the in-process app raises, which is no transport
failure) or ``{"status": 200, "takes_s": 10}`` (the answer comes 10 virtual seconds later).
Once its script is spent, the receiver behaves conformantly: 200 for a new event, 200 "already
applied" for a duplicate. It counts effects per event id; the sender never sees them.
"""

from __future__ import annotations

import socket
import ssl
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import httpx

from receiver.signing import event_id_of

__all__ = ["ScriptedReceiver"]


class ScriptedReceiver:
    """An ``httpx.MockTransport`` handler with per-event scripts and a conformant default."""

    def __init__(self, advance: Callable[[timedelta], object] | None = None) -> None:
        self.scripts: dict[str, list[Mapping[str, Any]]] = {}
        self.effects: Counter[str] = Counter()
        self.advance = advance

    def script(self, event_id: str, answers: list[Mapping[str, Any]]) -> None:
        self.scripts.setdefault(event_id, []).extend(answers)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        event_id = event_id_of(request.headers, request.content)
        queue = self.scripts.get(event_id)
        answer = queue.pop(0) if queue else None
        if answer is None:
            return self._conformant(event_id)
        if answer.get("takes_s") and self.advance is not None:
            self.advance(timedelta(seconds=float(answer["takes_s"])))
        error = answer.get("error")
        if error == "exception":  # an in-process app that raises: not a transport failure
            raise RuntimeError("scripted: the in-process app raised")
        if error is not None:
            raise _transport_error(str(error), request)
        headers = {"retry-after": str(answer["retry_after"])} if "retry_after" in answer else {}
        status = int(answer.get("status", 200))
        if 200 <= status < 300:
            return self._conformant(event_id, status)
        return httpx.Response(status, headers=headers, json={"scripted": status})

    def _conformant(self, event_id: str, status: int = 200) -> httpx.Response:
        if self.effects[event_id]:
            return httpx.Response(status, json={"status": "already applied"})
        self.effects[event_id] += 1
        return httpx.Response(status, json={"status": "applied"})


def _transport_error(kind: str, request: httpx.Request) -> httpx.TransportError:
    if kind == "timeout":
        return httpx.ReadTimeout("scripted: no answer in time", request=request)
    causes: dict[str, BaseException] = {
        "dns": socket.gaierror(-2, "Name or service not known"),
        "tls": ssl.SSLError(1, "scripted certificate verify failed"),
        "connect": ConnectionRefusedError(111, "Connection refused"),
    }
    error = httpx.ConnectError(f"scripted {kind} failure", request=request)
    error.__cause__ = causes.get(kind, OSError("scripted network failure"))
    if kind not in causes:
        return httpx.ReadError("scripted network failure", request=request)
    return error
