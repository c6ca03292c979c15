"""The dashboard's JSON API under ``/api/`` (the page's actions, for scripts and the CLI).

Reads: ``GET /api/csrf`` (the token a state-changing call sends as ``X-CSRF-Token``),
``GET /api/deliveries`` (the library's rows — deliveries and event-only events — newest first; the
library's filters as query parameters, ``limit`` up to 1000), ``GET /api/deliveries/export.csv``
(the library's CSV), ``GET /api/deliveries/{id}``, ``GET /api/events/{id}``, ``GET /api/dlq``,
``GET /api/faults``, ``GET /api/metrics``. Writes (JSON bodies; ``Origin`` and the token checked by
:mod:`.security`): ``POST /api/events`` (publish; 201), ``POST /api/deliveries/resend``
(``{"ids": [...], "actor": ...}``: delivery or event ids, the library's resend, 1–100, atomic;
202 with ``by_id``, or 409 ``WEBHOOK_DELIVERY_NOT_REPLAYABLE`` with the library's
``ineligible``), ``POST /api/deliveries/redrive`` (``ids``, ``actor``, ``reason``, ``deadline``;
202, or 409 refused), ``POST /api/faults`` (``{"name", "on", "options"}``).
Every refusal is ``application/problem+json``; ``code`` is set where the refusal has a stable code.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from receiver.problems import PROBLEM_CONTENT_TYPE, Problem, media_type, problem_body
from sender_sim.exceptions import (
    ConfigurationError,
    NotFound,
    RedriveError,
    RedriveRefused,
    SimulatorError,
)
from sender_sim.records import rfc3339
from sender_sim.sandbox import queries, views
from sender_sim.sandbox.engine import FAULT_NAMES, SandboxEngine

__all__ = ["MAX_LIST", "api_routes", "problem_response"]

MAX_LIST = 1000


def problem_response(
    status: int, slug: str, title: str, detail: str, extra: Mapping[str, object]
) -> Response:
    """An ``application/problem+json`` refusal (``type`` ends ``/sandbox-<slug>``) with ``extra``
    members such as a stable ``code``."""
    document = json.loads(problem_body(Problem(f"sandbox-{slug}", status, title), detail))
    document.update(extra)
    return Response(
        json.dumps(document, separators=(",", ":")),
        status_code=status,
        media_type=PROBLEM_CONTENT_TYPE,
    )


class _Refusal(Exception):
    def __init__(self, status: int, slug: str, title: str, detail: str, **extra: object) -> None:
        super().__init__(detail)
        self.response = problem_response(status, slug, title, detail, extra)


Handler = Callable[[Request], Awaitable[Response]]


def _refusals(handler: Handler) -> Handler:
    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except _Refusal as refusal:
            return refusal.response

    return endpoint


async def _json(request: Request) -> dict[str, Any]:
    media = media_type(request.headers.get("content-type", ""))
    if media != "application/json":
        raise _Refusal(415, "unsupported-media-type", "Send JSON", "expected application/json")
    try:
        document = json.loads(await request.body())
    except (ValueError, RecursionError) as error:  # not JSON, not UTF-8, nested past the stack
        raise _Refusal(400, "bad-json", "Not JSON", str(error)) from None
    if not isinstance(document, dict):
        raise _Refusal(400, "bad-json", "Not a JSON object", "send a JSON object")
    return document


def _text(document: dict[str, Any], name: str) -> str:
    value = document.get(name, "")
    if not isinstance(value, str):
        raise _Refusal(400, "bad-request", "Bad field", f"{name} must be a string")
    return value.strip()


def _ids(document: dict[str, Any]) -> list[str]:
    ids = document.get("ids")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise _Refusal(400, "bad-request", "Bad field", "ids must be a list of delivery ids")
    return ids


def api_routes(engine: SandboxEngine) -> list[BaseRoute]:
    """The ``/api/`` routes over ``engine`` (mounted by :func:`.web.create_dashboard`)."""

    def _where(request: Request) -> queries.RowFilter:
        try:
            return views.parse_filter(dict(request.query_params))
        except ConfigurationError as error:
            raise _Refusal(400, "bad-filter", "Bad filter", str(error)) from None

    async def csrf(request: Request) -> Response:
        return JSONResponse({"token": request.app.state.csrf_token, "header": "X-CSRF-Token"})

    async def deliveries(request: Request) -> Response:
        where = _where(request)
        try:
            limit = min(int(request.query_params.get("limit", "100")), MAX_LIST)
        except ValueError:
            raise _Refusal(400, "bad-filter", "Bad limit", "limit must be a number") from None
        found = await run_in_threadpool(views.list_rows, engine, where, max(limit, 1))
        return JSONResponse({"rows": [views.row_dict(r) for r in found]})

    async def export(request: Request) -> Response:
        where = _where(request)
        try:
            body, count = await run_in_threadpool(views.export_csv, engine, where)
        except queries.ExportTooLarge as error:
            status, slug, title, detail, extra = views.export_refusal(error)
            raise _Refusal(status, slug, title, detail, **extra) from None
        return Response(
            body, media_type="text/csv; charset=utf-8", headers={"x-row-count": str(count)}
        )

    async def delivery(request: Request) -> Response:
        try:
            view = await run_in_threadpool(
                views.delivery_view, engine, request.path_params["delivery_id"]
            )
        except NotFound as error:
            raise _Refusal(404, "not-found", "No such delivery", str(error)) from None
        return JSONResponse(views.delivery_dict(view))

    async def event(request: Request) -> Response:
        try:
            event_id = request.path_params["event_id"]
            view = await run_in_threadpool(views.event_view, engine, event_id)
        except NotFound as error:
            raise _Refusal(404, "not-found", "No such event", str(error)) from None
        return JSONResponse(views.event_dict(view))

    async def publish(request: Request) -> Response:
        document = await _json(request)
        fields = document.get("fields") or {}
        if not isinstance(fields, dict):
            raise _Refusal(400, "bad-publish", "Cannot publish", "fields must be an object")
        try:
            delivery_id = await engine.apublish(
                _text(document, "event_type") or None,
                fields,
                business_key=_text(document, "business_key") or None,
                deadline=_text(document, "deadline") or None,
            )
        except SimulatorError as error:
            raise _Refusal(400, "bad-publish", "Cannot publish", str(error)) from None
        return JSONResponse({"delivery_id": delivery_id}, status_code=201)

    async def resend(request: Request) -> Response:
        document = await _json(request)
        try:
            result = await engine.aresend(_ids(document), actor=_text(document, "actor"))
        except queries.ResendRefused as refused:
            status, slug, title, detail, extra = views.resend_refusal(refused)
            raise _Refusal(status, slug, title, detail, **extra) from None
        except SimulatorError as error:
            raise _Refusal(400, "bad-resend", "Cannot resend", str(error)) from None
        return JSONResponse(
            {
                "result": "queued",
                "actor": _text(document, "actor"),
                "by_id": {k: list(v) for k, v in result.by_id.items()},
                "delivery_ids": list(result.delivery_ids),
                "new_delivery_ids": list(result.new_delivery_ids),
            },
            status_code=202,
        )

    async def redrive(request: Request) -> Response:
        document = await _json(request)
        try:
            result = await engine.aredrive(
                _ids(document),
                actor=_text(document, "actor"),
                reason=_text(document, "reason"),
                deadline=_text(document, "deadline"),
            )
        except RedriveRefused as refused:
            raise _Refusal(409, "redrive-refused", "Redrive refused", str(refused)) from None
        except (RedriveError, SimulatorError) as error:
            raise _Refusal(400, "bad-redrive", "Incomplete redrive", str(error)) from None
        return JSONResponse(
            {
                "decision_id": result.decision_id,
                "queued": list(result.delivery_ids),
                "deadline_at": rfc3339(result.deadline_at),
            },
            status_code=202,
        )

    async def dlq(request: Request) -> Response:
        return JSONResponse({"by_reason": await run_in_threadpool(engine.dlq_summary)})

    async def faults(request: Request) -> Response:
        return JSONResponse({"faults": engine.faults()})

    async def toggle(request: Request) -> Response:
        document = await _json(request)
        name = _text(document, "name")
        options = _text(document, "options")
        try:
            if name not in FAULT_NAMES:
                raise ConfigurationError(f"unknown fault {name!r}")
            if document.get("on") is True:
                engine.fault_on(f"{name}:{options}" if options else name)
            elif document.get("on") is False:
                engine.fault_off(name)
            else:
                raise ConfigurationError("on must be true or false")
        except SimulatorError as error:
            raise _Refusal(400, "bad-fault", "Cannot toggle the fault", str(error)) from None
        return JSONResponse({"faults": engine.faults()})

    async def metrics(request: Request) -> Response:
        snapshot = await run_in_threadpool(engine.sim.metrics)
        return JSONResponse(snapshot.as_dict())

    return [
        Route("/csrf", _refusals(csrf), methods=["GET"]),
        Route("/deliveries", _refusals(deliveries), methods=["GET"]),
        Route("/deliveries/export.csv", _refusals(export), methods=["GET"]),
        Route("/deliveries/resend", _refusals(resend), methods=["POST"]),
        Route("/deliveries/redrive", _refusals(redrive), methods=["POST"]),
        Route("/deliveries/{delivery_id}", _refusals(delivery), methods=["GET"]),
        Route("/events", _refusals(publish), methods=["POST"]),
        Route("/events/{event_id}", _refusals(event), methods=["GET"]),
        Route("/dlq", _refusals(dlq), methods=["GET"]),
        Route("/faults", _refusals(faults), methods=["GET"]),
        Route("/faults", _refusals(toggle), methods=["POST"]),
        Route("/metrics", _refusals(metrics), methods=["GET"]),
    ]
