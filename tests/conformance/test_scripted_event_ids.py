"""The scripted stand-in receiver finds each scheme's event id where the scheme puts it (Stripe's
in the body), through the scheme registry rather than a list of header names."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from conformance.harnesses.scripted_receiver import ScriptedReceiver
from receiver.signing import scheme_named

BODY = json.dumps({"id": "evt_in_body", "type": "ping"}).encode()


@pytest.mark.parametrize(
    ("name", "event_id"),
    [("standard", "evt_header"), ("stripe", "evt_in_body"), ("github", "evt_header")],
)
def test_a_script_applies_to_the_event_id_of_every_scheme(name: str, event_id: str) -> None:
    scheme = scheme_named(name)
    headers = scheme.sign(
        BODY, secrets=[scheme.mint_secret()], event_id="evt_header", timestamp=1_700_000_000
    )
    receiver = ScriptedReceiver()
    receiver.script(event_id, [{"status": 503}])

    async def send_twice() -> tuple[httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(transport=receiver.transport()) as client:
            first = await client.post("http://scripted.test/", content=BODY, headers=headers)
            second = await client.post("http://scripted.test/", content=BODY, headers=headers)
        return first, second

    first, second = asyncio.run(send_twice())
    assert (first.status_code, second.status_code) == (503, 200)
    assert receiver.effects[event_id] == 1
