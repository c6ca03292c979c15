"""Hostile input at the ASGI level: fuzzed headers never get a 5xx; the cap holds mid-stream."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.types import Message, Receive, Scope, Send

from receiver.inbox.memory import MemoryInbox
from receiver.middleware import HookproofMiddleware
from receiver.signing import Secret, Verifier, scheme_named
from tests.receiver.test_middleware_kit import NOW_S, SECRET, run

SIGNATURE_HEADERS = [
    b"webhook-id",
    b"webhook-timestamp",
    b"webhook-signature",
    b"stripe-signature",
    b"x-hub-signature-256",
    b"x-github-delivery",
    b"content-length",
    b"content-type",
]

header_values = st.one_of(
    st.binary(max_size=80),
    st.text(max_size=80).map(lambda text: text.encode("utf-8")),
    st.sampled_from(
        [b"", b"v1,", b"v1,====", b"v1,abc v2,def", b"t=,v1=", b"sha256=zz", b"1e9", b"-5"]
    ),
    st.integers(min_value=-(10**15), max_value=10**15).map(lambda n: str(n).encode()),
)
headers_strategy = st.lists(
    st.tuples(
        st.one_of(st.sampled_from(SIGNATURE_HEADERS), st.binary(min_size=1, max_size=20)),
        header_values,
    ),
    max_size=8,
)


class _App:
    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.calls += 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def _scope(headers: list[tuple[bytes, bytes]], path: str = "/webhooks") -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }


async def _call(
    middleware: HookproofMiddleware, scope: dict[str, Any], chunks: list[bytes]
) -> tuple[int, list[Message]]:
    pending = list(chunks)
    sent: list[Message] = []

    async def receive() -> dict[str, Any]:
        if pending:
            chunk = pending.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(pending)}
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    await middleware(scope, receive, send)
    return int(sent[0]["status"]), sent


@pytest.mark.parametrize("scheme", ["standard", "stripe", "github"])
@given(headers=headers_strategy, body=st.binary(max_size=200))
def test_fuzzed_signature_headers_never_get_a_5xx(
    scheme: str, headers: list[tuple[bytes, bytes]], body: bytes
) -> None:
    secret = SECRET if scheme == "standard" else Secret("plain-secret")
    app = _App()
    middleware = HookproofMiddleware(
        app,
        verifier=Verifier([secret], scheme=scheme_named(scheme), clock=lambda: float(NOW_S)),
        inbox=MemoryInbox(),
        max_body=150,
    )
    status, sent = run(_call(middleware, _scope(headers), [body]))
    assert status in {400, 401, 413}
    assert app.calls == 0
    assert secret.value.encode() not in sent[1]["body"]


def test_streamed_body_over_the_cap_is_refused_without_reading_further() -> None:
    pulled = 0

    async def endless() -> dict[str, Any]:
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": b"x" * 1000, "more_body": True}

    app = _App()
    middleware = HookproofMiddleware(
        app, verifier=Verifier([SECRET]), inbox=MemoryInbox(), max_body=4096
    )
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    # No Content-Length: the client streams (chunked) and the cap is found while counting.
    run(middleware(_scope([(b"webhook-id", b"evt_stream")]), endless, send))
    assert sent[0]["status"] == 413
    assert pulled == 5  # 5000 bytes > 4096: the fifth chunk crossed the cap, no sixth was pulled
    assert app.calls == 0


def test_malformed_content_length_is_400() -> None:
    middleware = HookproofMiddleware(_App(), verifier=Verifier([SECRET]), inbox=MemoryInbox())
    status, _ = run(_call(middleware, _scope([(b"content-length", b"12x")]), [b"{}"]))
    assert status == 400


def test_client_gone_mid_body_gets_no_answer_and_no_claim() -> None:
    inbox = MemoryInbox()
    middleware = HookproofMiddleware(_App(), verifier=Verifier([SECRET]), inbox=inbox)
    sent: list[Message] = []

    async def gone() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    run(middleware(_scope([(b"webhook-id", b"evt_gone")]), gone, send))
    assert sent == []
    assert run(inbox.lookup("evt_gone")) is None


def test_non_http_scopes_pass_through() -> None:
    seen: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["type"])

    middleware = HookproofMiddleware(app, verifier=Verifier([SECRET]), inbox=MemoryInbox())

    async def receive() -> dict[str, Any]:
        return {"type": "lifespan.startup"}

    async def send(message: Message) -> None:
        return None

    run(middleware({"type": "lifespan"}, receive, send))
    assert seen == ["lifespan"]
