"""The reference receiver app: middleware, probe and a demo effect, from one settings object.

:func:`create_app` builds a Starlette app that

* guards ``settings.path`` with :class:`~receiver.middleware.HookproofMiddleware`;
* records one renewal reminder per event (:mod:`receiver.demo_effect`): in transactional mode
  through the inbox's commit transaction, in a table of the same database, so the reminder and
  the inbox record commit together; otherwise directly (at-least-once, deduplicated);
* answers the demo event type ``hookproof.demo.gone`` with 410 (stored: never send it again)
  and ``hookproof.demo.unavailable`` with 503 (transient: released, retried);
* serves the probe when ``settings.probe_token`` is set (its ``effects`` count reminder rows);
* answers ``GET /healthz``: 200 ``{"ok": true}`` while the inbox can record durably, else 503
  ``{"ok": false, "problem": "..."}`` (:mod:`receiver.health`), for supervisors and tests;
* answers every path, method and error it does not serve with an ``application/problem+json``
  problem (``/webhooks/`` with a trailing slash is a 404 problem, not a redirect).

The inbox is opened in the app's lifespan (``open_inbox(settings.db)``) unless one is passed in.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from receiver.demo_effect import Reminders, reminder_text, reminders_for
from receiver.exceptions import ConfigurationError, InboxUnavailable, InvalidPayload
from receiver.health import inbox_problem
from receiver.inbox.contract import DEFAULT_LEASE, Clock, Inbox, utc_now
from receiver.middleware import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_MAX_BODY,
    HookproofMiddleware,
    hookproof_delivery,
)
from receiver.probe import DEFAULT_PROBE_PREFIX
from receiver.problems import PROBLEM_CONTENT_TYPE, PROBLEMS, Problem, problem_body
from receiver.signing import DEFAULT_TOLERANCE_S, Secret, Verifier, scheme_named

__all__ = ["DEMO_ANSWERS", "ReceiverSettings", "build_verifier", "create_app"]

DEFAULT_DB = "hookproof-inbox.sqlite"

DEMO_ANSWERS: Mapping[str, int] = {
    "hookproof.demo.gone": 410,
    "hookproof.demo.unavailable": 503,
}
"""Event types the demo handler answers with a fixed status and no effect."""


@dataclass(frozen=True)
class ReceiverSettings:
    """Everything the reference receiver is configured with (the CLI's options, as data)."""

    secrets: Sequence[str] = field(repr=False)
    db: str = DEFAULT_DB
    path: str = "/webhooks"
    probe_token: str | None = field(default=None, repr=False)
    probe_prefix: str = DEFAULT_PROBE_PREFIX
    tolerance: int = DEFAULT_TOLERANCE_S
    scheme: str = "standard"
    max_body: int = DEFAULT_MAX_BODY
    body_timeout: float = DEFAULT_BODY_TIMEOUT_S
    lease: timedelta = DEFAULT_LEASE
    transactional: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.secrets, str):
            object.__setattr__(self, "secrets", tuple(self.secrets.split()))
        if not self.path.startswith("/"):
            raise ConfigurationError(f"the webhook path must start with '/' (got {self.path!r})")
        if not self.probe_prefix.startswith("/") or self.probe_prefix.rstrip("/") == "":
            raise ConfigurationError("the probe prefix must be a path such as /_hookproof/events")
        if self.max_body < 1:
            raise ConfigurationError("the body limit must be at least 1 byte")
        if not self.body_timeout > 0:
            raise ConfigurationError("the body read deadline must be a positive number of seconds")
        if self.lease <= timedelta(0):
            raise ConfigurationError("the lease must be a positive duration")
        if self.probe_token is not None and not self.probe_token.strip():
            raise ConfigurationError("the probe token must not be empty")


def build_verifier(settings: ReceiverSettings, clock: Clock | None = None) -> Verifier:
    """The verifier the settings describe (a bad secret or scheme is a ConfigurationError).

    With an injected ``clock`` the verifier reads it; otherwise it reads ``time.time``."""
    return Verifier(
        [Secret(value) for value in settings.secrets],
        scheme=scheme_named(settings.scheme),
        tolerance=settings.tolerance,
        clock=time.time if clock is None else (lambda: clock().timestamp()),
    )


@dataclass
class _Open:
    """What the lifespan opened: the inbox and the reminder store next to it."""

    inbox: Inbox | None = None
    reminders: Reminders | None = None

    def current_inbox(self) -> Inbox:
        if self.inbox is None:
            raise InboxUnavailable("the inbox is not open")
        return self.inbox

    def current_reminders(self) -> Reminders:
        if self.reminders is None:
            raise InboxUnavailable("the inbox is not open")
        return self.reminders


def _problem(status: int, slug: str, title: str, detail: str) -> Response:
    body = problem_body(Problem(slug, status, title), detail)
    return Response(body, status_code=status, media_type=PROBLEM_CONTENT_TYPE)


_ROUTING_PROBLEMS = {404: PROBLEMS["not-found"], 405: PROBLEMS["method-not-allowed"]}


async def _routing_problem(request: Request, error: Exception) -> Response:
    """Starlette's own 404/405 (and any HTTPException) as a problem document."""
    status = error.status_code if isinstance(error, HTTPException) else 500
    problem = _ROUTING_PROBLEMS.get(status, Problem("http-error", status, "Request refused"))
    detail = f"{request.method} {request.url.path} is not served here"
    headers = dict(error.headers or {}) if isinstance(error, HTTPException) else {}
    body = problem_body(problem, detail, status=status)
    return Response(body, status_code=status, media_type=PROBLEM_CONTENT_TYPE, headers=headers)


def create_app(
    settings: ReceiverSettings, *, clock: Clock | None = None, inbox: Inbox | None = None
) -> Starlette:
    """The reference receiver as a Starlette app (see the module docstring)."""
    now = clock or utc_now
    verifier = build_verifier(settings, clock)
    opened = _Open()

    async def webhook(request: Request) -> Response:
        delivery = hookproof_delivery(request)
        try:
            document = delivery.json()
        except InvalidPayload as error:
            return _problem(400, "invalid-payload", "The webhook body is not JSON", str(error))
        if not isinstance(document, dict):
            return _problem(
                400, "invalid-payload", "The webhook body is not JSON", "expected a JSON object"
            )
        event_type = str(document.get("type", ""))
        fixed = DEMO_ANSWERS.get(event_type)
        if fixed is not None:
            return JSONResponse({"event_id": delivery.event_id, "demo": event_type}, fixed)
        data = document.get("data")
        renewal = data.get("renewal_id") if isinstance(data, dict) else None
        renewal_id = None if renewal is None else reminder_text(str(renewal))
        event_type = reminder_text(event_type)
        reminders = opened.current_reminders()
        if settings.transactional:
            delivery.add_work(reminders.work(delivery.event_id, renewal_id, event_type))
        else:
            await reminders.apply_directly(delivery.event_id, renewal_id, event_type)
        return JSONResponse({"event_id": delivery.event_id, "reminder": "recorded"})

    async def health(request: Request) -> Response:
        problem = await inbox_problem(opened.inbox)
        if problem is not None:
            return JSONResponse({"ok": False, "problem": problem}, 503)
        return JSONResponse({"ok": True})

    async def effects(event_id: str) -> int:
        return await opened.current_reminders().count(event_id)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        from receiver.inbox.factory import open_inbox

        owned = inbox is None
        current = (
            inbox
            if inbox is not None
            else await open_inbox(settings.db, lease=settings.lease, clock=now)
        )
        try:
            reminders = reminders_for(current, settings.db)
            await reminders.prepare()
            opened.inbox, opened.reminders = current, reminders
            yield
        finally:
            opened.inbox, opened.reminders = None, None
            if owned:
                await current.close()

    middleware_options: dict[str, Any] = {
        "verifier": verifier,
        "inbox": opened.current_inbox,
        "paths": (settings.path,),
        "max_body": settings.max_body,
        "body_timeout": settings.body_timeout,
        "probe_token": settings.probe_token,
        "probe_prefix": settings.probe_prefix,
        "effects_counter": effects,
    }
    app = Starlette(
        routes=[
            Route(settings.path, webhook, methods=["POST"]),
            Route("/healthz", health, methods=["GET"]),
        ],
        middleware=[Middleware(HookproofMiddleware, **middleware_options)],
        exception_handlers={HTTPException: _routing_problem},
        lifespan=lifespan,
    )
    app.router.redirect_slashes = False  # a trailing-slash path is a 404 problem, not a redirect
    return app
