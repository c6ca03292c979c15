"""The receiver's pure ASGI middleware: verify, claim, call the app, commit, and only then answer.

For every request to a guarded path (matched below a mount's ``root_path`` too)
:class:`HookproofMiddleware`:

0. answers a method other than the delivery ``methods`` (``POST``) with a 405 problem, and two
   different fields of one signature header (``webhook-id``, …) with a 400 problem, without
   reading the body or touching the inbox;
1. refuses a declared ``Content-Length`` over ``max_body`` with 413, then reads the body while
   counting and stops pulling chunks (413) as soon as the count passes the cap; a body that has
   not fully arrived ``body_timeout`` seconds after the headers is a 408 problem (given up within
   an eighth of ``body_timeout`` after that: one swept timer per loop,
   :mod:`receiver.body_deadline`, not a timer per request);
2. verifies the raw bytes with a :class:`~receiver.signing.Verifier` (400/401 problem on failure),
   then checks the payload once as I-JSON (:mod:`receiver.ijson`; 400 problem), reusing the parse
   of a scheme that already read the body to verify it (the Stripe-style event id);
3. claims the event id in the :class:`~receiver.inbox.contract.Inbox`: a committed duplicate is
   answered with its stored status and never reaches the app; a copy in flight gets 503 with
   ``Retry-After``; an unreachable inbox gets 503, never a 2xx;
4. calls the app with a ``receive`` that replays the exact bytes and with a :class:`Delivery` in
   the scope (``scope["hookproof"]`` and ``scope["extensions"]["hookproof"]``, read by
   :func:`hookproof_delivery`), buffering the app's response;
5. commits the app's status together with the delivery's transactional work, or — when the app
   failed transiently (an exception, 5xx, 408, 429), or refused without the handler ever taking
   the delivery (a routing 404/405, an inner middleware's refusal: the app neither read the body
   nor called :func:`hookproof_delivery`) — releases the claim so the sender's retry can take it;
   each handler failure is one log line with its count for the event (:mod:`receiver.failures`);
6. sends the buffered response only once the commit is durable.

Non-HTTP scopes and unguarded paths pass straight through. The optional probe
(:mod:`receiver.probe`) is served here too, when a probe token is configured.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from receiver.body_deadline import BodyDeadlines
from receiver.exceptions import ConfigurationError, InboxUnavailable, VerificationError
from receiver.failures import FailureCounts
from receiver.ijson import parse_payload
from receiver.inbox.contract import Claim, ClaimOutcome, Inbox, TransactionalWork
from receiver.probe import DEFAULT_PROBE_PREFIX, EffectsCounter, serve_probe
from receiver.problems import PROBLEMS, problem_for, send_json, send_problem
from receiver.signing import SCHEMES, VerifiedMessage, Verifier

__all__ = [
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_MAX_BODY",
    "DEFAULT_METHODS",
    "SCOPE_KEY",
    "SIGNATURE_HEADERS",
    "Delivery",
    "HookproofMiddleware",
    "InboxSource",
    "hookproof_delivery",
    "is_transient",
]

logger = logging.getLogger("hookproof.receiver")

DEFAULT_MAX_BODY = 1024 * 1024
DEFAULT_METHODS = ("POST",)
"""The methods a delivery arrives with; any other method on a guarded path is a 405 problem."""
DEFAULT_BODY_TIMEOUT_S = 30.0
"""Seconds from the headers to the body's last byte before the read is given up (408)."""
SIGNATURE_HEADERS = frozenset(
    {"content-length", *(name for scheme in SCHEMES.values() for name in scheme.header_names)}
)
"""Header fields that must not appear twice with different values (which one would count?)."""
SCOPE_KEY = "hookproof"
"""Where the :class:`Delivery` sits in the ASGI scope (and in ``scope["extensions"]``)."""

InboxSource = Inbox | Callable[[], Inbox]
"""An inbox, or a getter returning the current one (e.g. opened by the app's lifespan); a getter
that raises :class:`~receiver.exceptions.InboxUnavailable` makes the middleware answer 503."""

_UNPARSED: Any = object()
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
    document: Any = _UNPARSED
    """The payload, parsed once and checked as I-JSON by the middleware (left unparsed when the
    middleware was told not to check payloads)."""
    taken: bool = False
    """Whether the app asked for this delivery (:func:`hookproof_delivery`)."""
    _work: list[TransactionalWork] = field(default_factory=list)

    @property
    def event_id(self) -> str:
        return self.message.event_id

    @property
    def body(self) -> bytes:
        return self.message.body

    def json(self) -> Any:
        """The body parsed as JSON (or :class:`~receiver.exceptions.InvalidPayload`)."""
        if self.document is _UNPARSED:
            return self.message.json()
        return self.document

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
    delivery.taken = True
    return delivery


class _BodyTooLarge(Exception):
    pass


class _ClientGone(Exception):
    pass


class _AmbiguousHeader(Exception):
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
        methods: Iterable[str] = DEFAULT_METHODS,
        max_body: int = DEFAULT_MAX_BODY,
        body_timeout: float = DEFAULT_BODY_TIMEOUT_S,
        check_payload: bool = True,
        probe_token: str | None = None,
        probe_prefix: str = DEFAULT_PROBE_PREFIX,
        effects_counter: EffectsCounter | None = None,
    ) -> None:
        if max_body < 0:
            raise ConfigurationError("max_body must not be negative")
        if not body_timeout > 0:
            raise ConfigurationError("body_timeout must be a positive number of seconds")
        self.methods = frozenset(method.upper() for method in methods)
        if not self.methods:
            raise ConfigurationError("at least one delivery method is required")
        if probe_token is not None and not probe_token:
            raise ConfigurationError("the probe token must not be empty")
        self.app = app
        self.verifier = verifier
        self._inbox_source = inbox
        self.paths = frozenset(paths)
        self.max_body = max_body
        self.body_timeout = body_timeout
        self.check_payload = check_payload
        self.probe_token = probe_token
        self.probe_prefix = probe_prefix.rstrip("/") + "/"
        self.effects_counter = effects_counter
        self.failures = FailureCounts()
        self._deadlines = BodyDeadlines(body_timeout)
        self._fixed_inbox = inbox if isinstance(inbox, Inbox) else None
        self._inbox_getter: Callable[[], Inbox] | None = None if isinstance(inbox, Inbox) else inbox
        self._allow = {"allow": ", ".join(sorted(self.methods))}

    def inbox(self) -> Inbox:
        """The inbox to use now (raises :class:`InboxUnavailable` when there is none)."""
        if self._fixed_inbox is not None:
            return self._fixed_inbox
        assert self._inbox_getter is not None
        try:
            return self._inbox_getter()
        except InboxUnavailable:
            raise
        except Exception as error:
            raise InboxUnavailable("the inbox is not open") from error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if scope.get("root_path"):
            path = _route_path(path, scope["root_path"])
        if path in self.paths:
            await self._guard(scope, receive, send)
            return
        if self.probe_token is not None:
            if path.startswith(self.probe_prefix):
                await self._probe(scope, send, path[len(self.probe_prefix) :])
                return
            if path == self.probe_prefix[:-1]:
                await self._probe(scope, send, "")
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
            failures=self.failures,
        )

    async def _guard(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in self.methods:
            await send_problem(
                send,
                PROBLEMS["method-not-allowed"],
                f"webhook deliveries are accepted with {self._allow['allow']} only",
                headers=self._allow,
            )
            return
        try:
            headers = _headers(scope)
        except _AmbiguousHeader as error:
            await send_problem(
                send,
                PROBLEMS["ambiguous-header"],
                f"the {error} header appears twice with different values; send it once",
            )
            return
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
            body = await self._read_body_in_time(receive)
        except _BodyTooLarge:
            await self._too_large(send)
            return
        except _ClientGone:
            return
        except TimeoutError:
            await send_problem(
                send,
                PROBLEMS["body-timeout"],
                f"the body did not arrive within {self.body_timeout:g} s; nothing was recorded",
                headers=_CLOSE,
            )
            return
        try:
            message = self.verifier.verify(body, headers)
            if not self.check_payload:
                document = _UNPARSED
            elif message.payload is not None:  # the scheme parsed it already: no second parse
                document = message.payload.checked()
            else:
                document = parse_payload(body)
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
            await self._handle(scope, receive, send, inbox, Delivery(message, claim, document))

    async def _read_body_in_time(self, receive: Receive) -> bytes:
        """The body, or :class:`TimeoutError` once ``body_timeout`` passed (``BodyDeadlines``)."""
        task = asyncio.current_task()
        if task is None:  # not run by a task (no ASGI server does that): the plain timeout
            async with asyncio.timeout(self.body_timeout):
                return await _read_body(receive, self.max_body, await receive())
        loop = task.get_loop()
        deadlines = self._deadlines
        deadlines.start(task, loop)
        try:
            message = await receive()
            # The usual delivery: the whole body in the first message, read without a helper
            # coroutine (a coroutine fewer to create and resume on every request).
            if message["type"] == "http.request" and not message.get("more_body", False):
                body: bytes = message.get("body", b"")
                if len(body) > self.max_body:
                    raise _BodyTooLarge
            else:
                body = await _read_body(receive, self.max_body, message)
        except asyncio.CancelledError:
            if deadlines.stop(task, loop) and task.uncancel() == 0:
                raise TimeoutError from None
            raise
        except BaseException:
            deadlines.stop(task, loop)
            raise
        deadlines.stop(task, loop)  # once, on the hot path (no ``finally`` stopping it twice)
        return body

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
        replay = _Replay(delivery.body, receive)
        try:
            await self.app(_scope_with(scope, delivery), replay, response)
        except Exception as error:
            self._failed(event_id, f"the webhook handler raised {type(error).__name__}: {error}")
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
            self._failed(event_id, "the webhook handler sent no response")
            await _release(inbox, event_id, token)
            await send_problem(
                send,
                PROBLEMS["handler-failed"],
                "the handler sent no response; the event was not recorded",
                retry_after=_IN_FLIGHT_RETRY_S,
            )
            return
        if is_transient(status) or (status >= 300 and not (delivery.taken or replay.delivered)):
            # Retry later, or a refusal the handler never decided (a routing 404/405: the app
            # never took the delivery): neither may be stored as the event's final answer.
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
        except Exception as error:
            self._failed(event_id, f"recording the event failed: {type(error).__name__}: {error}")
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
        start, body = response.messages()  # sent here, not by a helper coroutine: the hot path
        await send(start)
        await send(body)

    def _failed(self, event_id: str, reason: str) -> None:
        """One log line per handler failure, with how often this event has failed so far (the
        traceback, if any, only at DEBUG)."""
        count = self.failures.record(event_id)
        logger.error("event %s: %s (failure %d of this event)", event_id, reason, count)
        logger.debug("the failure of event %s", event_id, exc_info=True)


class _BufferedResponse:
    """An ASGI ``send`` that keeps the app's response until the middleware lets it out."""

    __slots__ = ("bodies", "others", "start")

    def __init__(self) -> None:
        self.start: Message | None = None
        self.bodies: list[Message] = []
        self.others: list[Message] = []

    @property
    def status(self) -> int | None:
        return None if self.start is None else int(self.start["status"])

    async def __call__(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.start = message
        elif kind == "http.response.body":
            self.bodies.append(message)
        else:
            self.others.append(message)

    def messages(self) -> tuple[Message, Message]:
        """The response to send: its start, then its whole body in one message (the app's own
        message when it sent a single one: passed on as it is)."""
        assert self.start is not None
        bodies = self.bodies
        if len(bodies) == 1 and not bodies[0].get("more_body", False):
            return self.start, bodies[0]
        body = b"".join(message.get("body", b"") for message in bodies)
        return self.start, {"type": "http.response.body", "body": body}

    async def replay(self, send: Send) -> None:
        start, body = self.messages()
        await send(start)
        await send(body)


_CLOSE = {"connection": "close"}


def _route_path(path: str, root_path: str) -> str:
    """``path`` below a mount's ``root_path`` (as Starlette routes it); else ``path`` unchanged."""
    if path.startswith(root_path) and path[len(root_path) : len(root_path) + 1] in ("/", ""):
        return path[len(root_path) :]
    return path


def _headers(scope: Scope) -> dict[str, str]:
    """Request headers by name (ASGI names are lower-case); the first of repeated headers wins,
    except that a :data:`SIGNATURE_HEADERS` field repeated with another value is ambiguous."""
    raw = scope["headers"]
    if not isinstance(raw, list | tuple):  # ASGI allows any iterable
        raw = list(raw)
    # One comprehension, the last occurrence first so that the first one wins; only a request
    # that repeats a header name (rare) takes the loop that looks for ambiguous repeats.
    headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in reversed(raw)}
    if len(headers) != len(raw):
        seen: dict[bytes, bytes] = {}
        for raw_name, raw_value in raw:
            first = seen.setdefault(raw_name, raw_value)
            if first != raw_value and (name := raw_name.decode("latin-1")) in SIGNATURE_HEADERS:
                raise _AmbiguousHeader(name)
    return headers


async def _read_body(receive: Receive, cap: int, message: Message) -> bytes:
    """The whole body from its first ``message`` on, pulling no further chunk once more than
    ``cap`` bytes arrived."""
    parts: list[bytes] = []
    size = 0
    while True:
        if message["type"] == "http.disconnect":
            raise _ClientGone
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            raise _BodyTooLarge
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)
        message = await receive()


class _Replay:
    """A ``receive`` that hands the app the exact verified bytes, then defers to the server;
    ``delivered`` tells whether the app read them."""

    __slots__ = ("body", "delivered", "receive")

    def __init__(self, body: bytes, receive: Receive) -> None:
        self.body = body
        self.receive = receive
        self.delivered = False

    async def __call__(self) -> Message:
        if not self.delivered:
            self.delivered = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        return await self.receive()


def _scope_with(scope: Scope, delivery: Delivery) -> Scope:
    extensions = dict(scope.get("extensions") or {})
    extensions[SCOPE_KEY] = delivery
    return {**scope, SCOPE_KEY: delivery, "extensions": extensions}


async def _release(inbox: Inbox, event_id: str, token: int) -> None:
    """Release a claim; if even that fails the lease expiry frees the event later."""
    try:
        await inbox.release(event_id, token)
    except Exception as error:  # expected during an outage: one line, not a traceback
        logger.warning(
            "could not release event %s (%s: %s); its lease will expire",
            event_id,
            type(error).__name__,
            error,
        )


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
