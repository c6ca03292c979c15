"""The sandbox's local web dashboard: server-rendered HTML over one :class:`SandboxEngine`.

Pages: ``/`` (publish form, fault toggles, the latest deliveries, the DLQ by reason and business
key), ``/deliveries/{id}`` (state, attempts, transition ledger, the plain-words story and an
audited redrive form), ``/dlq`` (dead letters filtered by ``reason`` and ``business_key``, with a
bulk redrive form). Forms post to ``/publish``, ``/faults`` and ``/redrive`` and redirect (303)
back. No JavaScript; HTML is escaped everywhere; secrets never appear. Pages are rendered by plain
functions, which Starlette runs in its thread pool, so their SQLite reads never block the event
loop; the forms change the engine on the loop, where the terminal changes it too.

The dashboard listens on 127.0.0.1 only (the CLI binds it); requests whose ``Host`` is not a
loopback name, or whose ``Origin`` is another site, are refused (403), so a web page elsewhere
cannot drive it. Bad input is a 4xx: an HTML page for browsers, ``application/problem+json``
otherwise; never a 500.
"""

from __future__ import annotations

import html
import shlex
from collections.abc import Sequence
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from receiver.problems import PROBLEM_CONTENT_TYPE, Problem, problem_body
from sender_sim.commands.support import describe_row, parse_fields, transition_text
from sender_sim.exceptions import (
    ConfigurationError,
    NotFound,
    RedriveError,
    RedriveRefused,
    SimulatorError,
)
from sender_sim.records import DeadLetterReason, Delivery, State, rfc3339
from sender_sim.sandbox.engine import FAULT_NAMES, SandboxEngine

__all__ = ["LOOPBACK_NAMES", "create_dashboard"]

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
"""Host names the dashboard answers to."""

_FORM = "application/x-www-form-urlencoded"
_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem;max-width:80rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}
td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;font-size:.9rem}
th{background:#f4f4f4}pre{background:#f7f7f7;padding:1rem;
overflow-x:auto;font-size:.8rem}form{margin:.5rem 0}input,select{margin-right:.5rem}
.delivered{color:#17692c}.dead_letter{color:#a3161a}.scheduled,.leased{color:#8a5a00}
nav a{margin-right:1rem}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    document = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)}</title>"
        f"<style>{_STYLE}</style></head><body><nav><a href='/'>Overview</a>"
        f"<a href='/dlq'>Dead letters</a></nav><h1>{_e(title)}</h1>{body}</body></html>"
    )
    return HTMLResponse(document, status_code=status)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], empty: str) -> str:
    if not rows:
        return f"<p><em>{_e(empty)}</em></p>"
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _state(delivery: Delivery) -> str:
    text = delivery.state.value + (f" ({delivery.reason.value})" if delivery.reason else "")
    return f"<span class='{_e(delivery.state.value)}'>{_e(text)}</span>"


def _link(delivery_id: str) -> str:
    return f"<a href='/deliveries/{quote(delivery_id)}'>{_e(delivery_id)}</a>"


def _problem(request: Request, status: int, slug: str, title: str, detail: str) -> Response:
    if "text/html" in request.headers.get("accept", ""):
        return _page(title, f"<p>{_e(detail)}</p><p><a href='/'>Back</a></p>", status)
    body = problem_body(Problem(f"sandbox-{slug}", status, title), detail)
    return Response(body, status_code=status, media_type=PROBLEM_CONTENT_TYPE)


def _redrive_form(ids: Sequence[str]) -> str:
    hidden = "".join(f"<input type='hidden' name='ids' value='{_e(i)}'>" for i in ids)
    return (
        f"<form method='post' action='/redrive'>{hidden}"
        "<label>Actor <input name='actor' required placeholder='you@example.com'></label>"
        "<label>Reason <input name='reason' required placeholder='why'></label>"
        "<label>New deadline <input name='deadline' required value='+1h'></label>"
        f"<button>Redrive {len(ids)}</button></form>"
    )


class _Dashboard:
    def __init__(self, engine: SandboxEngine) -> None:
        self.engine = engine

    def _rows(self, items: Sequence[Delivery]) -> list[list[str]]:
        sim = self.engine.sim
        return [
            [
                _link(d.delivery_id),
                _e(sim.event(d.event_id).type),
                _e(d.business_key or "-"),
                _state(d),
                _e(f"{d.attempt}/{d.max_attempts}"),
                _e(rfc3339(d.deadline_at)),
                _e(d.last_outcome or "-"),
            ]
            for d in items
        ]

    _HEADERS = ("Delivery", "Type", "Business key", "State", "Attempts", "Deadline", "Last")

    def _dlq_summary(self) -> str:
        rows = []
        for reason, keys in sorted(self.engine.dlq_summary().items()):
            for key, count in sorted(keys.items()):
                query = {"reason": reason} | ({"business_key": key} if key != "-" else {})
                rows.append(
                    [
                        f"<a href='/dlq?{_e(urlencode({'reason': reason}))}'>{_e(reason)}</a>",
                        f"<a href='/dlq?{_e(urlencode(query))}'>{_e(key)}</a>",
                        _e(count),
                    ]
                )
        return _table(("Reason", "Business key", "Dead letters"), rows, "No dead letters.")

    def _faults(self) -> str:
        rows = []
        for name, spec in self.engine.faults().items():
            if spec:
                control = (
                    f"<form method='post' action='/faults'><input type='hidden' name='name' "
                    f"value='{_e(name)}'><input type='hidden' name='action' value='off'>"
                    "<button>Turn off</button></form>"
                )
            else:
                control = (
                    f"<form method='post' action='/faults'><input type='hidden' name='name' "
                    f"value='{_e(name)}'><input type='hidden' name='action' value='on'>"
                    "<input name='options' placeholder='attempts=1,p=0.5'>"
                    "<button>Turn on</button></form>"
                )
            rows.append([_e(name), _e(f"ON {spec}" if spec else "off"), control])
        return _table(("Fault", "State", ""), rows, "")

    def _publish_form(self) -> str:
        templates = self.engine.templates
        options = "".join(
            f"<option{' selected' if n == templates.default else ''}>{_e(n)}</option>"
            for n in templates.names()
        )
        return (
            "<form method='post' action='/publish'>"
            f"<label>Type <select name='event_type'>{options}</select></label>"
            "<label>Business key <input name='business_key' placeholder='from the template'>"
            "</label><label>Deadline <input name='deadline' placeholder='+24h'></label>"
            "<label>Fields <input name='fields' size='30' placeholder='key=value key=value'>"
            "</label><button>Publish</button></form>"
        )

    def overview(self, request: Request) -> Response:
        engine = self.engine
        clock = "virtual" if engine.virtual else "real"
        url = engine.sim.endpoint_config(engine.endpoint_id).endpoint.url
        deliveries = _table(self._HEADERS, self._rows(engine.deliveries()), "No deliveries yet.")
        body = (
            f"<p>Forwarding to <code>{_e(url)}</code> &middot; policy "
            f"{_e(engine.sim.policy.name)} &middot; {clock} time "
            f"&middot; now {_e(rfc3339(engine.sim.now()))}</p>"
            f"<h2>Publish</h2>{self._publish_form()}"
            f"<h2>Deliveries</h2>{deliveries}"
            f"<h2>Dead letters by reason and business key</h2>{self._dlq_summary()}"
            f"<h2>Faults</h2>{self._faults()}"
        )
        return _page("hookproof sandbox", body)

    def delivery(self, request: Request) -> Response:
        engine = self.engine
        try:
            delivery = engine.delivery(request.path_params["delivery_id"])
        except NotFound as error:
            return _problem(request, 404, "not-found", "No such delivery", str(error))
        did = delivery.delivery_id
        attempts = [
            [
                _e(a.number),
                _e(rfc3339(a.started_at)),
                _e(a.worker),
                _e(a.fencing_token),
                _e(f"HTTP {a.status}" if a.status is not None else a.kind.value),
                _e(a.classification),
                _e("yes" if a.acked else "NO (stale or crashed)"),
                f"<code>{_e(a.response_sample[:200])}</code>",
            ]
            for a in engine.attempts(did)
        ]
        ledger = [
            [_e(rfc3339(r.at)), _e(transition_text(r)), _e(r.actor), _e(describe_row(r))]
            for r in engine.ledger(did)
        ]
        redrive = (
            f"<h2>Redrive</h2>{_redrive_form([did])}" if delivery.state is State.DEAD_LETTER else ""
        )
        body = (
            f"<p>State: {_state(delivery)} &middot; attempts {_e(delivery.attempt)}/"
            f"{_e(delivery.max_attempts)} &middot; deadline {_e(rfc3339(delivery.deadline_at))}"
            f"</p>{redrive}<h2>Attempts</h2>"
            + _table(
                ("#", "Started", "Worker", "Token", "Answer", "Class", "Acked", "Sample"),
                attempts,
                "No attempt yet.",
            )
            + "<h2>Ledger</h2>"
            + _table(("At", "Transition", "Actor", "What happened"), ledger, "")
            + f"<h2>Story</h2><pre>{_e(engine.explain(did))}</pre>"
        )
        return _page(f"Delivery {did}", body)

    def dlq(self, request: Request) -> Response:
        reason = request.query_params.get("reason") or None
        key = request.query_params.get("business_key") or None
        if reason is not None and reason not in set(DeadLetterReason):
            return _problem(
                request, 400, "bad-filter", "Unknown dead-letter reason", f"no reason {reason!r}"
            )
        items = self.engine.dlq(reason=reason, business_key=key)
        filters = "".join(
            f"<option{' selected' if r.value == reason else ''}>{_e(r.value)}</option>"
            for r in DeadLetterReason
        )
        body = (
            "<form method='get' action='/dlq'><label>Reason <select name='reason'>"
            f"<option value=''>any</option>{filters}</select></label><label>Business key "
            f"<input name='business_key' value='{_e(key or '')}'></label><button>Filter</button>"
            f"</form>{self._dlq_summary()}"
            + _table(self._HEADERS, self._rows(items), "No dead letters match.")
            + (
                f"<h2>Redrive these {len(items)}</h2>"
                + _redrive_form([d.delivery_id for d in items])
                if items
                else ""
            )
        )
        return _page("Dead letters", body)

    # -- forms ---------------------------------------------------------------------------------

    async def _form(self, request: Request) -> list[tuple[str, str]] | Response:
        host = (request.headers.get("host") or "").rsplit(":", 1)[0].strip("[]")
        if host.lower() not in LOOPBACK_NAMES:
            return _problem(request, 403, "forbidden", "Loopback only", "unexpected Host header")
        origin = request.headers.get("origin")
        if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
            return _problem(request, 403, "forbidden", "Cross-site form", "foreign Origin header")
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != _FORM:
            return _problem(
                request, 415, "unsupported-media-type", "Send a form", f"expected {_FORM}"
            )
        raw = await request.body()
        try:
            return parse_qsl(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError:
            return _problem(request, 400, "bad-form", "The form is not UTF-8", "decode failed")

    @staticmethod
    def _one(form: Sequence[tuple[str, str]], name: str) -> str:
        values = [v for k, v in form if k == name]
        return values[-1].strip() if values else ""

    async def publish(self, request: Request) -> Response:
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        try:
            fields = parse_fields(shlex.split(self._one(form, "fields")))
            delivery_id = self.engine.publish(
                self._one(form, "event_type") or None,
                fields,
                business_key=self._one(form, "business_key") or None,
                deadline=self._one(form, "deadline") or None,
            )
        except (SimulatorError, ValueError) as error:
            return _problem(request, 400, "bad-publish", "Cannot publish", str(error))
        await self.engine.kick()
        return RedirectResponse(f"/deliveries/{quote(delivery_id)}", status_code=303)

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
            return _problem(request, 400, "bad-fault", "Cannot toggle the fault", str(error))
        return RedirectResponse("/", status_code=303)

    async def redrive(self, request: Request) -> Response:
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        ids = [i.strip() for k, v in form if k == "ids" for i in v.split(",") if i.strip()]
        try:
            result = self.engine.redrive(
                ids,
                actor=self._one(form, "actor"),
                reason=self._one(form, "reason"),
                deadline=self._one(form, "deadline"),
            )
        except RedriveRefused as refused:
            return _problem(request, 409, "redrive-refused", "Redrive refused", str(refused))
        except (RedriveError, NotFound, ConfigurationError) as error:
            return _problem(request, 400, "bad-redrive", "Incomplete redrive", str(error))
        except SimulatorError as error:
            return _problem(request, 400, "bad-redrive", "Cannot redrive", str(error))
        await self.engine.kick()
        target = (
            f"/deliveries/{quote(result.delivery_ids[0])}" if len(result.delivery_ids) == 1 else "/"
        )
        return RedirectResponse(target, status_code=303)


def create_dashboard(engine: SandboxEngine) -> Starlette:
    """The dashboard app over ``engine`` (see the module docstring)."""
    board = _Dashboard(engine)
    return Starlette(
        routes=[
            Route("/", board.overview, methods=["GET"]),
            Route("/deliveries/{delivery_id}", board.delivery, methods=["GET"]),
            Route("/dlq", board.dlq, methods=["GET"]),
            Route("/publish", board.publish, methods=["POST"]),
            Route("/faults", board.faults, methods=["POST"]),
            Route("/redrive", board.redrive, methods=["POST"]),
        ]
    )
