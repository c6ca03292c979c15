"""The receiver's pure ASGI middleware: verify, claim, call the app, commit, and only then answer.

For every request to a guarded path :class:`HookproofMiddleware`:

1. refuses a declared ``Content-Length`` over ``max_body`` with 413, then reads the body while
   counting and stops pulling chunks (413) as soon as the count passes the cap;
2. verifies the raw bytes with a :class:`~receiver.signing.Verifier` (400/401 problem on failure);
3. claims the event id in the :class:`~receiver.inbox.contract.Inbox`: a committed duplicate is
   answered with its stored status and never reaches the app; a copy in flight gets 503 with
   ``Retry-After``; an unreachable inbox gets 503, never a 2xx;
4. calls the app with a ``receive`` that replays the exact bytes and with a :class:`Delivery` in
   the scope (``scope["hookproof"]`` and ``scope["extensions"]["hookproof"]``, read by
   :func:`hookproof_delivery`), buffering the app's response;
5. commits the app's status together with the delivery's transactional work, or — when the app
   failed transiently (an exception, 5xx, 408, 429) — releases the claim so the sender's retry can
   take it, and answers 5xx;
6. sends the buffered response only once the commit is durable.

Non-HTTP scopes and unguarded paths pass straight through. The optional probe
(:mod:`receiver.probe`) is served here too, when a probe token is configured.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from receiver.exceptions import ConfigurationError, InboxUnavailable, VerificationError
from receiver.inbox.contract import Claim, ClaimOutcome, Inbox, TransactionalWork
from receiver.probe import DEFAULT_PROBE_PREFIX, EffectsCounter, serve_probe
from receiver.problems import PROBLEMS, problem_for, send_json, send_problem
from receiver.signing import VerifiedMessage, Verifier

__all__ = [
    "DEFAULT_MAX_BODY",
    "SCOPE_KEY",
    "Delivery",
    "HookproofMiddleware",
    "InboxSource",
    "hookproof_delivery",
    "is_transient",
]

logger = logging.getLogger("hookproof.receiver")

DEFAULT_MAX_BODY = 1024 * 1024
SCOPE_KEY = "hookproof"
"""Where the :class:`Delivery` sits in the ASGI scope (and in ``scope["extensions"]``)."""

InboxSource = Inbox | Callable[[], Inbox]
"""An inbox, or a getter returning the current one (e.g. opened by the app's lifespan); a getter
that raises :class:`~receiver.exceptions.InboxUnavailable` makes the middleware answer 503."""

_TRANSIENT_STATUSES = frozenset({408, 429})
_IN_FLIGHT_RETRY_S = 1


def is_transient(status: int) -> bool:
    """Whether an app's answer means "try again later": 5xx, 408 and 429 release the claim."""
    return status >= 500 or status in _TRANSIENT_STATUSES


@dataclass
class Delivery:
    """The verified delivery being handled, as the app's handler sees it.

    ``add_work`` registers callables that run inside the inbox's commit transaction with the
    backend's transaction handle (a ``sqlite3.Connection``, a psycopg connection, or a
    :class:`~receiver.inbox.memory.MemoryInbox`'s ``store``): the handler's own writes then
    commit together with the inbox record, or not at all (exactly-once effect).
    """

    message: VerifiedMessage
    claim: Claim
    _work: list[TransactionalWork] = field(default_factory=list)

    @property
    def event_id(self) -> str:
        return self.message.event_id

    @property
    def body(self) -> bytes:
        return self.message.body

    def json(self) -> Any:
        """The body parsed as JSON (or :class:`~receiver.exceptions.InvalidPayload`)."""
        return self.message.json()

    def add_work(self, work: TransactionalWork) -> None:
        """Run ``work(handle)`` inside the commit transaction of this event's inbox record."""
        self._work.append(work)

    @property
    def work(self) -> tuple[TransactionalWork, ...]:
        return tuple(self._work)


def hookproof_delivery(request: HTTPConnection) -> Delivery:
    """The :class:`Delivery` of a request guarded by :class:`HookproofMiddleware`.

    Usable directly (``hookproof_delivery(request)``) and as a FastAPI dependency
    (``Depends(hookproof_delivery)``).
    """
    delivery = request.scope.get(SCOPE_KEY)
    if not isinstance(delivery, Delivery):
        raise ConfigurationError(
            f"no hookproof delivery on {request.url.path!r}: is HookproofMiddleware guarding it?"
        )
    return delivery


class _BodyTooLarge(Exception):
    pass


class _ClientGone(Exception):
    pass


class HookproofMiddleware:
    """Guards ``paths`` of an ASGI app; see the module docstring for what it answers and when."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        verifier: Verifier,
        inbox: InboxSource,
        paths: Iterable[str] = ("/webhooks",),
        max_body: int = DEFAULT_MAX_BODY,
        probe_token: str | None = None,
        probe_prefix: str = DEFAULT_PROBE_PREFIX,
        effects_counter: EffectsCounter | None = None,
    ) -> None:
        if max_body < 0:
            raise ConfigurationError("max_body must not be negative")
        if probe_token is not None and not probe_token:
            raise ConfigurationError("the probe token must not be empty")
        self.app = app
        self.verifier = verifier
        self._inbox_source = inbox
        self.paths = frozenset(paths)
        self.max_body = max_body
        self.probe_token = probe_token
        self.probe_prefix = probe_prefix.rstrip("/") + "/"
        self.effects_counter = effects_counter

    def inbox(self) -> Inbox:
        """The inbox to use now (raises :class:`InboxUnavailable` when there is none)."""
        source = self._inbox_source
        if isinstance(source, Inbox):
            return source
        try:
            return source()
        except InboxUnavailable:
            raise
        except Exception as error:
            raise InboxUnavailable("the inbox is not open") from error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path in self.paths:
            await self._guard(scope, receive, send)
            return
        if self.probe_token is not None and path.startswith(self.probe_prefix):
            await self._probe(scope, send, path[len(self.probe_prefix) :])
            return
        await self.app(scope, receive, send)

    async def _probe(self, scope: Scope, send: Send, event_id: str) -> None:
        assert self.probe_token is not None
        try:
            inbox = self.inbox()
        except InboxUnavailable:
            await _unavailable(send)
            return
        await serve_probe(
            scope,
            send,
            event_id=event_id,
            token=self.probe_token,
            inbox=inbox,
            effects_counter=self.effects_counter,
        )

    async def _guard(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers(scope)
        declared = headers.get("content-length")
        if declared is not None:
            if not (declared.isascii() and declared.isdigit()):
                await send_problem(
                    send, PROBLEMS["invalid-content-length"], "Content-Length must be digits"
                )
                return
            if int(declared) > self.max_body:
                await self._too_large(send)
                return
        try:
            body = await _read_body(receive, self.max_body)
        except _BodyTooLarge:
            await self._too_large(send)
            return
        except _ClientGone:
            return
        try:
            message = self.verifier.verify(body, headers)
        except VerificationError as error:
            await send_problem(send, problem_for(error), str(error))
            return
        try:
            inbox = self.inbox()
            claim = await inbox.claim(message.event_id)
        except InboxUnavailable as error:
            # Expected while the store is away: one line per delivery, not a traceback.
            logger.warning("inbox unavailable, answering 503 for %s: %s", message.event_id, error)
            await _unavailable(send)
            return
        except Exception:
            logger.exception("the inbox could not claim event %s", message.event_id)
            await _unavailable(send)
            return
        if claim.outcome is ClaimOutcome.COMMITTED:
            await _answer_duplicate(send, claim)
        elif claim.outcome is ClaimOutcome.IN_FLIGHT:
            await send_problem(
                send,
                PROBLEMS["delivery-in-flight"],
                "another copy of this event is being handled; retry after the lease",
                retry_after=claim.retry_after or _IN_FLIGHT_RETRY_S,
                event_id=claim.event_id,
            )
        else:
            await self._handle(scope, receive, send, inbox, Delivery(message, claim))

    async def _too_large(self, send: Send) -> None:
        await send_problem(
            send,
            PROBLEMS["body-too-large"],
            f"the body is larger than {self.max_body} bytes",
        )

    async def _handle(
        self, scope: Scope, receive: Receive, send: Send, inbox: Inbox, delivery: Delivery
    ) -> None:
        response = _BufferedResponse()
        event_id, token = delivery.event_id, delivery.claim.token
        try:
            await self.app(_scope_with(scope, delivery), _replay(delivery.body, receive), response)
        except Exception:
            logger.exception("the webhook handler failed on event %s", event_id)
            await _release(inbox, event_id, token)
            await send_problem(
                send,
                PROBLEMS["handler-failed"],
                "the handler failed; the event was not recorded",
                retry_after=_IN_FLIGHT_RETRY_S,
            )
            return
        except BaseException:
            await _release(inbox, event_id, token)
            raise
        status = response.status
        if status is None:
            logger.error("the webhook handler sent no response for event %s", event_id)
            await _release(inbox, event_id, token)
            await send_problem(
                send,
                PROBLEMS["handler-failed"],
                "the handler sent no response; the event was not recorded",
                retry_after=_IN_FLIGHT_RETRY_S,
            )
            return
        if is_transient(status):
            await _release(inbox, event_id, token)
            await response.replay(send)
            return
        try:
            committed = await inbox.commit(event_id, token, status, delivery.work)
        except InboxUnavailable as error:
            logger.warning("inbox unavailable, answering 503 for %s: %s", event_id, error)
            await _release(inbox, event_id, token)
            await _unavailable(send)
            return
        except Exception:
            logger.exception("the commit of event %s failed", event_id)
            await _release(inbox, event_id, token)
            await send_problem(
                send,
                PROBLEMS["handler-failed"],
                "recording the event failed; nothing of it was kept",
                retry_after=_IN_FLIGHT_RETRY_S,
            )
            return
        if not committed:
            await send_problem(
                send,
                PROBLEMS["claim-lost"],
                "the claim expired and another copy took the event over; retry",
                retry_after=_IN_FLIGHT_RETRY_S,
            )
            return
        await response.replay(send)


class _BufferedResponse:
    """An ASGI ``send`` that keeps the app's response until the middleware lets it out."""

    def __init__(self) -> None:
        self.start: Message | None = None
        self.parts: list[bytes] = []
        self.others: list[Message] = []

    @property
    def status(self) -> int | None:
        return None if self.start is None else int(self.start["status"])

    async def __call__(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.start = message
        elif kind == "http.response.body":
            self.parts.append(message.get("body", b""))
        else:
            self.others.append(message)

    async def replay(self, send: Send) -> None:
        assert self.start is not None
        await send(self.start)
        await send({"type": "http.response.body", "body": b"".join(self.parts)})


def _headers(scope: Scope) -> dict[str, str]:
    """Request headers by name (ASGI names are lower-case); the first of repeated headers wins."""
    return {
        name.decode("latin-1"): value.decode("latin-1")
        for name, value in reversed(scope["headers"])
    }


async def _read_body(receive: Receive, cap: int) -> bytes:
    """The whole body, pulling no further chunk once more than ``cap`` bytes arrived."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _ClientGone
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            raise _BodyTooLarge
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the exact verified bytes, then defers to the server."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _scope_with(scope: Scope, delivery: Delivery) -> Scope:
    extensions = dict(scope.get("extensions") or {})
    extensions[SCOPE_KEY] = delivery
    return {**scope, SCOPE_KEY: delivery, "extensions": extensions}


async def _release(inbox: Inbox, event_id: str, token: int) -> None:
    """Release a claim; if even that fails the lease expiry frees the event later."""
    try:
        await inbox.release(event_id, token)
    except Exception:
        logger.exception("could not release event %s; its lease will expire", event_id)


async def _unavailable(send: Send) -> None:
    await send_problem(
        send,
        PROBLEMS["inbox-unavailable"],
        "the inbox is unavailable; nothing was recorded, retry later",
        retry_after=_IN_FLIGHT_RETRY_S,
    )


async def _answer_duplicate(send: Send, claim: Claim) -> None:
    status = claim.status if claim.status is not None else 200
    if 200 <= status < 300:
        body = json.dumps(
            {"event_id": claim.event_id, "duplicate": True, "status": status},
            separators=(",", ":"),
        ).encode("utf-8")
        await send_json(send, status, body)
        return
    await send_problem(
        send,
        PROBLEMS["already-answered"],
        f"this event was already answered {status}; it is not handled again",
        status=status,
        event_id=claim.event_id,
        duplicate=True,
    )
