"""Concurrent copies reach the receiver together: no copy's body leaves before every copy of its
group has written its head (conformance/harnesses/together.py), in the gate itself and in both
ways the runner sends copies (the wire harness's ``deliver_concurrently``, the sender simulator's
``attempt_concurrently``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from conformance.harnesses.together import ArriveTogether, gate_bound
from conformance.results import Outcome
from tests.conformance.support import app_settings, run_in_process


class _Recorder:
    """An ASGI receiver that notes when each request's head arrives (the app is called) and when
    its body has been read, and answers 200 to everything."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, int]] = []
        self._count = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self._count += 1
        number = self._count
        headers = dict(scope["headers"])
        event_id = headers.get(b"webhook-id", b"").decode()
        self.events.append(("head", event_id, number))
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
        self.events.append(("body", event_id, number))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": json.dumps({"ok": True}).encode()})

    def groups(self) -> dict[str, list[str]]:
        """The kinds of events per event id, in arrival order."""
        kinds: dict[str, list[str]] = {}
        for kind, event_id, _ in self.events:
            kinds.setdefault(event_id, []).append(kind)
        return kinds


def _all_heads_first(kinds: list[str]) -> bool:
    heads = kinds.count("head")
    return heads > 1 and kinds == ["head"] * heads + ["body"] * heads


def test_no_body_leaves_before_every_copy_wrote_its_head() -> None:
    recorder = _Recorder()

    async def go(gated: bool) -> None:
        transport = httpx.ASGITransport(app=recorder)
        async with httpx.AsyncClient(transport=transport, base_url="http://receiver") as client:
            gate = ArriveTogether(5)

            async def one() -> None:
                copy = gate.copy()
                body = b'{"type":"x"}'
                try:
                    await client.post(
                        "/webhooks",
                        headers={"webhook-id": f"evt_{gated}", "content-length": str(len(body))},
                        content=copy.body(body) if gated else body,
                    )
                finally:
                    copy.done()

            await asyncio.gather(*(one() for _ in range(5)))

    asyncio.run(go(gated=False))
    asyncio.run(go(gated=True))
    groups = recorder.groups()
    assert _all_heads_first(groups["evt_True"])
    assert not _all_heads_first(groups["evt_False"])  # plain copies go head, body, head, body


def test_a_copy_that_ends_without_its_body_holds_nobody_up() -> None:
    gate = ArriveTogether(3, bound_s=3600)  # the bound is never what opens it here

    async def go() -> list[bytes]:
        first, second, refused = gate.copy(), gate.copy(), gate.copy()

        async def read(copy_body: Any) -> bytes:
            return b"".join([chunk async for chunk in copy_body])

        readers = [asyncio.ensure_future(read(c.body(b"x"))) for c in (first, second)]
        await asyncio.sleep(0)
        assert not gate.is_open
        refused.done()  # answered on its headers: it never sends a body
        refused.done()  # counted once
        return list(await asyncio.gather(*readers))

    assert asyncio.run(go()) == [b"x", b"x"]
    assert gate.is_open


def test_the_wait_is_bounded() -> None:
    gate = ArriveTogether(2, bound_s=0)

    async def go() -> bytes:
        return b"".join([chunk async for chunk in gate.copy().body(b"alone")])

    assert asyncio.run(go()) == b"alone"  # the other copy never came; the bound let it go
    assert gate_bound(30) == 1.0
    assert gate_bound(0.4) == 0.1  # never more than a quarter of the exchange's deadline


def test_the_runner_sends_concurrent_copies_together() -> None:
    """Both the wire harness's copies (in-flight-duplicate) and the sender simulator's
    (concurrent-duplicates) reach the receiver heads first, then bodies."""
    recorder = _Recorder()
    settings = app_settings(
        None,
        concurrency=6,
        select=("idempotency.in-flight-duplicate", "idempotency.concurrent-duplicates"),
    )
    results = run_in_process(recorder, settings)
    # No probe: judged by status codes alone, and every answer is a 200.
    assert {sid: r.outcome for sid, r in results.items()} == {
        "idempotency.in-flight-duplicate": Outcome.PASSED,
        "idempotency.concurrent-duplicates": Outcome.PASSED,
    }
    groups = {len(kinds) // 2: kinds for kinds in recorder.groups().values()}
    # in-flight-duplicate: two copies together, then one after them; concurrent-duplicates: six
    assert sorted(groups) == [3, 6]
    assert _all_heads_first(groups[3][:4])
    assert groups[3][4:] == ["head", "body"]
    assert _all_heads_first(groups[6])
