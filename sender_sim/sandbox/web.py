"""The sandbox's local web dashboard: a Starlette app over one :class:`SandboxEngine`, its pages
rendered by Jinja2 templates (``templates_html/``, autoescaped), its script and style served from
``static/`` (no CDN, no build step).

Pages: ``/`` (publish form and the live list of the library's rows — deliveries and event-only
events — filtered by the library's filters: row kind, status, HTTP class, endpoint, business key
and event/delivery time; the list refreshes itself from ``/fragments/deliveries``),
``/deliveries/{id}`` (the attempt timeline, the request as sent, the body pretty and exact, the
response samples, the ledger, deadline and time left, and the actions possible now),
``/events/{id}`` (an event, event-only or not: its status, body, deliveries and resend),
``/dlq`` (dead letters by reason and business key, bulk redrive or resend of 1–100 selected),
``/faults`` (toggles with their state), ``/metrics`` (the simulator's metrics and an SVG chart of
attempts over time by classification), ``/export.csv`` (the filtered list as CSV; more than 5000
rows is the library's ``EXPORT_TOO_LARGE``, a 422 problem). Forms post to ``/publish``,
``/faults``, ``/redrive`` and ``/resend`` and redirect (303) back, where a confirmation says what
was queued. The JSON API under ``/api/`` is :mod:`.api`.

Security (:mod:`.security`): loopback ``Host`` only (403), ``Origin`` and a CSRF token on every
state-changing request (403), framing denied, a strict Content-Security-Policy. Writes run in a
worker thread (the engine's ``a…`` methods), reads in Starlette's thread pool: the event loop
never waits on SQLite. Bad input is a 4xx — an HTML page for browsers, ``application/problem+json``
otherwise — never a 500.
"""

from __future__ import annotations

import contextlib
import secrets
import shlex
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from receiver.problems import media_type
from receiver.redaction import shown_url
from sender_sim.commands.support import parse_fields
from sender_sim.exceptions import (
    ConfigurationError,
    NotFound,
    RedriveError,
    RedriveRefused,
    SimulatorError,
)
from sender_sim.records import DeadLetterReason, format_duration, rfc3339
from sender_sim.sandbox import queries, views
from sender_sim.sandbox.api import api_routes, problem_response
from sender_sim.sandbox.chart import attempts_chart
from sender_sim.sandbox.engine import FAULT_EFFECT, FAULT_NAMES, SandboxEngine
from sender_sim.sandbox.security import (
    CSRF_FIELD,
    LOOPBACK_NAMES,
    Guard,
    LoopbackHosts,
    new_token,
)

__all__ = ["LOOPBACK_NAMES", "Dashboard", "Notice", "create_dashboard"]

_FORM = "application/x-www-form-urlencoded"
_FLASH_COOKIE = "hookproof_flash"
_LIST_LIMIT = 100
_CHART_DELIVERIES = 500


def _templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("sender_sim.sandbox", "templates_html"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ts"] = lambda v: rfc3339(v) if v is not None else "-"
    env.filters["clock"] = lambda v: v.strftime("%H:%M:%S.%f")[:-3] if v is not None else "-"
    env.filters["hms"] = lambda v: v.strftime("%H:%M:%S") if v is not None else "-"
    env.filters["day_clock"] = lambda v: v.strftime("%b %d %H:%M") if v is not None else "-"
    env.filters["dur"] = format_duration
    env.globals["quote"] = lambda v: quote(str(v), safe="")
    return Jinja2Templates(env=env)


def _filter_query(params: Mapping[str, str]) -> str:
    keep = {k: params[k] for k in views.FILTER_FIELDS if params.get(k, "").strip()}
    return urlencode(keep)


@dataclass(frozen=True)
class Notice:
    """A confirmation shown once on the next page: what was queued, with links."""

    title: str
    lines: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    tone: str = "ok"


class Dashboard:
    """The dashboard's pages and forms over one engine (see the module docstring)."""

    def __init__(self, engine: SandboxEngine, *, token: str | None = None) -> None:
        self.engine = engine
        self.token = token or new_token()
        self.templates = _templates()
        self._notices: dict[str, Notice] = {}

    # -- rendering -----------------------------------------------------------------------------

    def _context(self, request: Request) -> dict[str, Any]:
        engine = self.engine
        flash = request.cookies.get(_FLASH_COOKIE)
        return {
            "csrf_field": CSRF_FIELD,
            "csrf_token": self.token,
            "endpoint_id": engine.endpoint_id,
            "endpoint_url": shown_url(engine.sim.endpoint_config(engine.endpoint_id).endpoint.url),
            "policy": engine.sim.policy.name,
            "clock": "virtual" if engine.virtual else "real",
            "now": engine.sim.now(),
            "path": request.url.path,
            "notice": self._notices.pop(flash, None) if flash else None,
            "active_faults": [n for n, spec in engine.faults().items() if spec],
            "dlq_total": len(engine.dlq()),
        }

    def render(
        self, request: Request, name: str, context: Mapping[str, Any], status: int = 200
    ) -> Response:
        merged = self._context(request) | dict(context)
        response = self.templates.TemplateResponse(request, name, merged, status_code=status)
        if merged["notice"] is not None:
            response.delete_cookie(_FLASH_COOKIE)
        return response

    def problem(
        self, request: Request, status: int, slug: str, title: str, detail: str, **extra: object
    ) -> Response:
        if "text/html" in request.headers.get("accept", ""):
            return self.render(
                request, "problem.html", {"title": title, "detail": detail, "extra": extra}, status
            )
        return problem_response(status, slug, title, detail, extra)

    def redirect(self, target: str, notice: Notice | None = None) -> Response:
        response = RedirectResponse(target, status_code=303)
        if notice is not None:
            key = secrets.token_urlsafe(12)
            if len(self._notices) > 100:
                self._notices.clear()
            self._notices[key] = notice
            response.set_cookie(_FLASH_COOKIE, key, httponly=True, samesite="strict")
        return response

    # -- pages ---------------------------------------------------------------------------------

    def _list_context(self, request: Request) -> dict[str, Any] | Response:
        params = dict(request.query_params)
        try:
            where = views.parse_filter(params)
        except ConfigurationError as error:
            return self.problem(request, 400, "bad-filter", "Bad filter", str(error))
        found = views.list_rows(self.engine, where, _LIST_LIMIT)
        return {
            "rows": found,
            "limit": _LIST_LIMIT,
            "export_limit": queries.EXPORT_LIMIT,
            "filters": {k: params.get(k, "") for k in views.FILTER_FIELDS},
            "filter_query": _filter_query(params),
            "kinds": [k.value for k in queries.RowKind],
            "statuses": queries.STATUSES,
            "http_classes": queries.HTTP_CLASSES,
        }

    def overview(self, request: Request) -> Response:
        context = self._list_context(request)
        if isinstance(context, Response):
            return context
        templates = self.engine.templates
        context |= {
            "template_names": templates.names(),
            "default_template": templates.default,
            "dlq_groups": views.dlq_groups(self.engine.dlq_summary()),
        }
        return self.render(request, "overview.html", context)

    def fragment(self, request: Request) -> Response:
        context = self._list_context(request)
        if isinstance(context, Response):
            return context
        return self.render(request, "_rows.html", context)

    def delivery(self, request: Request) -> Response:
        try:
            view = views.delivery_view(self.engine, request.path_params["delivery_id"])
        except NotFound as error:
            return self.problem(request, 404, "not-found", "No such delivery", str(error))
        return self.render(request, "delivery.html", {"view": view, "d": view.delivery})

    def event(self, request: Request) -> Response:
        try:
            view = views.event_view(self.engine, request.path_params["event_id"])
        except NotFound as error:
            return self.problem(request, 404, "not-found", "No such event", str(error))
        return self.render(request, "event.html", {"view": view, "e": view.event})

    def body(self, request: Request) -> Response:
        """The event body, byte-exact (a download)."""
        try:
            delivery = self.engine.delivery(request.path_params["delivery_id"])
        except NotFound as error:
            return self.problem(request, 404, "not-found", "No such delivery", str(error))
        body = self.engine.sim.event(delivery.event_id).body
        name = f"{delivery.event_id}.json"
        return Response(
            body,
            media_type="application/octet-stream",
            headers={"content-disposition": f'attachment; filename="{quote(name)}"'},
        )

    def dlq(self, request: Request) -> Response:
        reason = request.query_params.get("reason") or None
        key = request.query_params.get("business_key") or None
        if reason is not None and reason not in set(DeadLetterReason):
            return self.problem(
                request, 400, "bad-filter", "Unknown dead-letter reason", f"no reason {reason!r}"
            )
        items = self.engine.dlq(reason=reason, business_key=key)
        events = {d.event_id: self.engine.sim.event(d.event_id) for d in items}
        context = {
            "items": items,
            "events": events,
            "reason": reason or "",
            "business_key": key or "",
            "reasons": [r.value for r in DeadLetterReason],
            "dlq_groups": views.dlq_groups(self.engine.dlq_summary()),
            "limit": queries.RESEND_LIMIT,
        }
        return self.render(request, "dlq.html", context)

    def faults_page(self, request: Request) -> Response:
        context = {"faults": self.engine.faults(), "effects": FAULT_EFFECT}
        return self.render(request, "faults.html", context)

    def metrics(self, request: Request) -> Response:
        engine = self.engine
        snapshot = engine.sim.metrics()
        attempts = [
            a
            for d in engine.deliveries(limit=_CHART_DELIVERIES)
            for a in engine.sim.attempts(d.delivery_id)
        ]
        chart = attempts_chart(attempts, now=engine.sim.now())
        return self.render(request, "metrics.html", {"m": snapshot, "chart": chart})

    def export(self, request: Request) -> Response:
        try:
            where = views.parse_filter(dict(request.query_params))
        except ConfigurationError as error:
            return self.problem(request, 400, "bad-filter", "Bad filter", str(error))
        try:
            body, count = views.export_csv(self.engine, where)
        except queries.ExportTooLarge as error:
            status, slug, title, detail, extra = views.export_refusal(error)
            return self.problem(request, status, slug, title, detail, **extra)
        return Response(
            body,
            media_type="text/csv; charset=utf-8",
            headers={
                "content-disposition": 'attachment; filename="deliveries.csv"',
                "x-row-count": str(count),
            },
        )

    # -- forms ---------------------------------------------------------------------------------

    async def _form(self, request: Request) -> list[tuple[str, str]] | Response:
        media = media_type(request.headers.get("content-type", ""))
        if media != _FORM:
            return self.problem(
                request, 415, "unsupported-media-type", "Send a form", f"expected {_FORM}"
            )
        raw = await request.body()
        try:
            return parse_qsl(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError:
            return self.problem(request, 400, "bad-form", "The form is not UTF-8", "decode failed")

    @staticmethod
    def _one(form: Sequence[tuple[str, str]], name: str) -> str:
        values = [v for k, v in form if k == name]
        return values[-1].strip() if values else ""

    @staticmethod
    def _ids(form: Sequence[tuple[str, str]]) -> list[str]:
        return [i.strip() for k, v in form if k == "ids" for i in v.split(",") if i.strip()]

    async def publish(self, request: Request) -> Response:
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        try:
            fields = parse_fields(shlex.split(self._one(form, "fields")))
            delivery_id = await self.engine.apublish(
                self._one(form, "event_type") or None,
                fields,
                business_key=self._one(form, "business_key") or None,
                deadline=self._one(form, "deadline") or None,
            )
        except (SimulatorError, ValueError) as error:
            return self.problem(request, 400, "bad-publish", "Cannot publish", str(error))
        return self.redirect(f"/deliveries/{quote(delivery_id)}")

    async def faults(self, request: Request) -> Response:
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        name = self._one(form, "name")
        action = self._one(form, "action")
        options = self._one(form, "options")
        try:
            if name not in FAULT_NAMES:
                raise ConfigurationError(f"unknown fault {name!r}")
            if action == "on":
                self.engine.fault_on(f"{name}:{options}" if options else name)
            elif action == "off":
                self.engine.fault_off(name)
            else:
                raise ConfigurationError("action must be on or off")
        except SimulatorError as error:
            return self.problem(request, 400, "bad-fault", "Cannot toggle the fault", str(error))
        state = "on" if action == "on" else "off"
        back = self._one(form, "back")
        target = back if back in ("/", "/faults") else "/"
        return self.redirect(target, Notice(f"Fault {name} is {state}"))

    async def redrive(self, request: Request) -> Response:
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        ids = self._ids(form)
        try:
            result = await self.engine.aredrive(
                ids,
                actor=self._one(form, "actor"),
                reason=self._one(form, "reason"),
                deadline=self._one(form, "deadline"),
            )
        except RedriveRefused as refused:
            return self.problem(request, 409, "redrive-refused", "Redrive refused", str(refused))
        except (RedriveError, NotFound, ConfigurationError) as error:
            return self.problem(request, 400, "bad-redrive", "Incomplete redrive", str(error))
        except SimulatorError as error:
            return self.problem(request, 400, "bad-redrive", "Cannot redrive", str(error))
        queued = result.delivery_ids
        notice = Notice(
            f"Redrive decision #{result.decision_id}: queued {len(queued)} "
            f"deliver{'y' if len(queued) == 1 else 'ies'}",
            (f"new deadline {rfc3339(result.deadline_at)}",),
            tuple((d, f"/deliveries/{quote(d)}") for d in queued),
        )
        target = f"/deliveries/{quote(queued[0])}" if len(queued) == 1 else "/dlq"
        return self.redirect(target, notice)

    async def resend(self, request: Request) -> Response:
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        actor = self._one(form, "actor")
        try:
            result = await self.engine.aresend(self._ids(form), actor=actor)
        except queries.ResendRefused as refused:
            status, slug, title, detail, extra = views.resend_refusal(refused)
            return self.problem(request, status, slug, title, detail, **extra)
        except SimulatorError as error:
            return self.problem(request, 400, "bad-resend", "Cannot resend", str(error))
        queued = [d for ids in result.by_id.values() for d in ids]
        notice = Notice(
            f"Resend by {actor}: queued {len(queued)} deliver{'y' if len(queued) == 1 else 'ies'}",
            tuple(
                f"{item}: {'one more attempt' if ids == (item,) else 'as ' + ', '.join(ids)}"
                for item, ids in result.by_id.items()
            ),
            tuple((d, f"/deliveries/{quote(d)}") for d in queued),
        )
        target = f"/deliveries/{quote(queued[0])}" if len(queued) == 1 else "/"
        return self.redirect(target, notice)


def _threaded(handler: Callable[[Request], Response]) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        return await run_in_threadpool(handler, request)

    return endpoint


def create_dashboard(engine: SandboxEngine, *, token: str | None = None) -> Starlette:
    """The dashboard app over ``engine``; ``app.state.csrf_token`` is its CSRF token."""
    board = Dashboard(engine, token=token)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await engine.sim.aclose()  # the simulator's own HTTP client, on the loop that used it

    app = Starlette(
        lifespan=lifespan,
        routes=[
            Route("/", _threaded(board.overview), methods=["GET"]),
            Route("/fragments/deliveries", _threaded(board.fragment), methods=["GET"]),
            Route("/deliveries/{delivery_id}", _threaded(board.delivery), methods=["GET"]),
            Route("/deliveries/{delivery_id}/body", _threaded(board.body), methods=["GET"]),
            Route("/events/{event_id}", _threaded(board.event), methods=["GET"]),
            Route("/dlq", _threaded(board.dlq), methods=["GET"]),
            Route("/faults", _threaded(board.faults_page), methods=["GET"]),
            Route("/metrics", _threaded(board.metrics), methods=["GET"]),
            Route("/export.csv", _threaded(board.export), methods=["GET"]),
            Route("/publish", board.publish, methods=["POST"]),
            Route("/faults", board.faults, methods=["POST"]),
            Route("/redrive", board.redrive, methods=["POST"]),
            Route("/resend", board.resend, methods=["POST"]),
            Mount("/api", routes=api_routes(engine)),
            Mount(
                "/static", StaticFiles(packages=[("sender_sim.sandbox", "static")]), name="static"
            ),
        ],
        middleware=[
            Middleware(LoopbackHosts),
            Middleware(Guard, token=board.token),
        ],
    )
    app.state.csrf_token = board.token
    app.state.dashboard = board
    return app
