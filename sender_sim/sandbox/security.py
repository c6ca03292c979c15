"""The dashboard's security model as two ASGI middlewares, wrapped around every route.

- :class:`LoopbackHosts` is Starlette's ``TrustedHostMiddleware`` limited to the loopback names,
  answering a foreign or missing ``Host`` with **403** (Starlette's own answer is 400) on every
  method, so DNS rebinding cannot reach a page or an action.
- :class:`Guard`: every request that is not ``GET``/``HEAD``/``OPTIONS`` must carry an ``Origin``
  equal to the dashboard's own (missing, ``null`` or another site: 403) and the dashboard's CSRF
  token, as the ``X-CSRF-Token`` header or the ``csrf_token`` form field (missing or wrong: 403).
  The token is random per dashboard process and only shown inside its own pages (and
  ``GET /api/csrf``), which another site cannot read. Every response gets
  ``X-Frame-Options: DENY``, a restrictive Content-Security-Policy (scripts, styles and images
  from the dashboard only, no inline script, no framing, forms post only to itself),
  ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: same-origin`` and
  ``Cache-Control: no-store``.

Escaping is the template engine's (Jinja2 autoescape), not this module's.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from receiver.problems import PROBLEM_CONTENT_TYPE, Problem, media_type, problem_body

__all__ = [
    "CSP",
    "CSRF_FIELD",
    "CSRF_HEADER",
    "LOOPBACK_NAMES",
    "Guard",
    "LoopbackHosts",
    "new_token",
]

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
"""Host names the dashboard answers to."""
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_FORM = "application/x-www-form-urlencoded"
_MAX_FORM_BYTES = 1 << 20
_SECURITY_HEADERS = (
    ("x-frame-options", "DENY"),
    ("content-security-policy", CSP),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "same-origin"),  # "no-referrer" would make the browser send Origin: null
    ("cache-control", "no-store"),
)


def new_token() -> str:
    return secrets.token_urlsafe(32)


async def _forbidden(send: Send, detail: str) -> None:
    body = problem_body(Problem("sandbox-forbidden", 403, "Forbidden"), detail)
    headers = [(b"content-type", PROBLEM_CONTENT_TYPE.encode())]
    headers += [(k.encode(), v.encode()) for k, v in _SECURITY_HEADERS]
    await send({"type": "http.response.start", "status": 403, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def host_name(host_header: str | None) -> str | None:
    """The host name of a ``Host`` header (``[::1]:8000`` -> ``::1``), lower case."""
    if not host_header:
        return None
    text = host_header.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        return text[1:end] if end > 0 else None
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


class LoopbackHosts(TrustedHostMiddleware):
    """``TrustedHostMiddleware`` over :data:`LOOPBACK_NAMES`, refusing with 403 (not 400)."""

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str] = LOOPBACK_NAMES) -> None:
        names = {h.lower() for h in allowed_hosts}
        # Starlette keeps the brackets of an IPv6 literal when it compares
        bracketed = {f"[{h}]" for h in names if ":" in h}
        super().__init__(app, allowed_hosts=sorted(names | bracketed), www_redirect=False)
        self.names = frozenset(names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            host = host_name(Headers(scope=scope).get("host"))
            if host not in self.names:
                await _forbidden(send, "this dashboard answers only to a loopback Host")
                return
        await super().__call__(scope, receive, send)


class Guard:
    """Origin and CSRF checks on state-changing requests; security headers on every response."""

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        self.app = app
        self.token = token

    def _valid(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(
            candidate.encode("utf-8", "replace"), self.token.encode()
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in _SECURITY_HEADERS:
                    headers[name] = value
            await send(message)

        if scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send_with_headers)
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin is None or origin.strip().lower() == "null":
            await _forbidden(send, "a state-changing request needs this dashboard's Origin")
            return
        if urlsplit(origin).netloc.lower() != (headers.get("host") or "").lower():
            await _forbidden(send, "foreign Origin header")
            return
        if self._valid(headers.get(CSRF_HEADER)):
            await self.app(scope, receive, send_with_headers)
            return
        media = media_type(headers.get("content-type", ""))
        body = await _read_body(receive) if media == _FORM else b""
        if body is None or not self._valid(_form_token(body)):
            await _forbidden(send, "missing or wrong CSRF token (reload the page)")
            return
        await self.app(scope, _replay(body, receive), send_with_headers)


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body (``None`` when larger than a form may be)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > _MAX_FORM_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _form_token(body: bytes) -> str | None:
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True)
    except UnicodeDecodeError:
        return None
    values = [v for k, v in pairs if k == CSRF_FIELD]
    return values[-1] if values else None


def _replay(body: bytes, then: Receive) -> Receive:
    """A ``receive`` that hands the app the body already read, then the real messages."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await then()

    return receive
