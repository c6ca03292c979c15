"""The dashboard's security model over HTTP (``httpx.ASGITransport``): loopback ``Host`` only on
every route and method (403), ``Origin`` and the CSRF token on every state-changing request (403),
framing and scripts locked down by headers, and an XSS payload in every user-supplied field
rendered inert (escaped by the template engine)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest

from sender_sim import Simulator, SQLiteStore, VirtualClock
from sender_sim.sandbox.engine import SandboxEngine
from sender_sim.sandbox.templates import Template, TemplateSet
from sender_sim.sandbox.web import create_dashboard
from tests.sender_sim.test_cli_support import SECRET

pytestmark = pytest.mark.anyio

XSS = "<script>alert(1)</script>\"'><img src=x onerror=alert(2)>"
RAW_MARKERS = ("<script>alert(1)", "<img src=x onerror", "<b onmouseover")
HTML = {"accept": "text/html"}


class Site:
    def __init__(self, engine: SandboxEngine, web: httpx.AsyncClient, token: str) -> None:
        self.engine = engine
        self.web = web
        self.token = token
        self.good = {"origin": "http://127.0.0.1", "x-csrf-token": token}


def _echo(request: httpx.Request) -> httpx.Response:
    """A receiver that answers 410 with the request body (so the response sample is user data)."""
    return httpx.Response(410, content=request.content, headers={"content-type": "text/plain"})


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    async with httpx.AsyncClient(transport=httpx.MockTransport(_echo)) as client:
        sim = Simulator(
            SQLiteStore(":memory:"),
            clock=VirtualClock(datetime(2026, 8, 13, 9, tzinfo=UTC)),
            client=client,
        )
        sim.add_endpoint("app", "http://127.0.0.1:9/webhooks", [SECRET])
        templates = TemplateSet(
            {"order.created": Template("order.created", {"order_id": "ord_{n}"}, "order_id")},
            "order.created",
        )
        engine = SandboxEngine(sim, endpoint_id="app", templates=templates)
        app = create_dashboard(engine)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as web:
            yield Site(engine, web, app.state.csrf_token)
        sim.store.close()


GETS = ["/", "/dlq", "/faults", "/metrics", "/export.csv", "/api/deliveries", "/static/app.js"]
POSTS = ["/publish", "/faults", "/redrive", "/resend", "/api/events", "/api/deliveries/resend"]


@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1.evil.example", "", "localhost.:80"])
async def test_a_foreign_host_is_403_on_every_get_and_post(site: Site, host: str) -> None:
    for path in GETS:
        response = await site.web.get(path, headers={"host": host})
        assert response.status_code == 403, path
        assert response.headers["x-frame-options"] == "DENY"
    for path in POSTS:
        response = await site.web.post(path, data={}, headers={"host": host, **site.good})
        assert response.status_code == 403, path
    assert site.engine.deliveries() == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost:8123", "[::1]:8123"])
async def test_loopback_hosts_are_served(site: Site, host: str) -> None:
    response = await site.web.get("/", headers={"host": host})
    assert response.status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {},  # no Origin, no token
        {"origin": "http://127.0.0.1"},  # no token
        {"origin": "http://127.0.0.1", "x-csrf-token": "wrong"},
        {"origin": "null", "x-csrf-token": "GOOD"},
        {"x-csrf-token": "GOOD"},  # missing Origin
        {"origin": "http://evil.example", "x-csrf-token": "GOOD"},
        {"origin": "http://127.0.0.1:9999", "x-csrf-token": "GOOD"},  # another port is another site
    ],
)
async def test_state_changing_requests_need_the_origin_and_the_token(
    site: Site, headers: dict[str, str]
) -> None:
    headers = {k: site.token if v == "GOOD" else v for k, v in headers.items()}
    for path in POSTS:
        form = await site.web.post(path, data={"event_type": "order.created"}, headers=headers)
        assert form.status_code == 403, (path, headers)
        assert form.headers["content-type"] == "application/problem+json"
    api = await site.web.post("/api/events", json={}, headers=headers)
    assert api.status_code == 403
    assert site.engine.deliveries() == []


async def test_the_form_field_token_works_and_a_wrong_one_does_not(site: Site) -> None:
    origin = {"origin": "http://127.0.0.1"}
    wrong = await site.web.post(
        "/publish", data={"csrf_token": "nope", "event_type": "order.created"}, headers=origin
    )
    assert wrong.status_code == 403
    right = await site.web.post(
        "/publish", data={"csrf_token": site.token, "event_type": "order.created"}, headers=origin
    )
    assert right.status_code == 303
    assert len(site.engine.deliveries()) == 1


async def test_every_page_carries_the_token_and_the_lockdown_headers(site: Site) -> None:
    await site.web.post("/publish", data={"event_type": "order.created"}, headers=site.good)
    did = site.engine.deliveries()[0].delivery_id
    for path in ["/", "/dlq", "/faults", f"/deliveries/{did}"]:
        response = await site.web.get(path, headers=HTML)
        assert response.status_code == 200
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp
        assert "frame-ancestors 'none'" in csp
        assert "unsafe-inline" not in csp
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert "<script>" not in response.text  # no inline script: the CSP would refuse it
        for form in response.text.split('method="post"')[1:]:
            assert f'name="csrf_token" value="{site.token}"' in form.split("</form>")[0]
    assert (await site.web.get("/api/csrf")).json()["token"] == site.token


def _inert(text: str) -> None:
    for marker in RAW_MARKERS:
        assert marker not in text


async def test_an_xss_payload_in_every_user_field_is_rendered_inert(site: Site) -> None:
    published = await site.web.post(
        "/publish",
        data={"business_key": XSS, "fields": f"note={json.dumps(XSS)}", "deadline": "+2h"},
        headers=site.good,
    )
    assert published.status_code == 303
    delivery = site.engine.deliveries()[0]
    did = delivery.delivery_id
    assert delivery.state.value == "dead_letter"  # the echo receiver answers 410
    redriven = await site.web.post(
        "/redrive",
        data={"ids": did, "actor": XSS, "reason": XSS, "deadline": "+1h"},
        headers=site.good,
    )
    assert redriven.status_code == 303
    resent = await site.web.post("/resend", data={"ids": did, "actor": XSS}, headers=site.good)
    assert resent.status_code == 303
    await site.web.post(
        "/faults", data={"name": "lost_response", "action": "on", "options": XSS}, headers=site.good
    )
    pages = {
        "/": None,
        f"/?business_key={XSS}&endpoint_id={XSS}": "&lt;script&gt;",
        f"/dlq?business_key={XSS}": "&lt;script&gt;",
        f"/deliveries/{did}": "&lt;script&gt;alert(1)&lt;/script&gt;",
        "/deliveries/<b onmouseover=alert(3)>": "&lt;b onmouseover=alert(3)&gt;",
        "/metrics": None,
        "/faults": None,
        f"/?status={XSS}": "&lt;script&gt;",
        f"/?event_from={XSS}": "&lt;script&gt;",
    }
    for path, escaped in pages.items():
        response = await site.web.get(path, headers=HTML)
        assert response.status_code in (200, 400, 404), path
        _inert(response.text)
        if escaped:
            assert escaped in response.text, path
    detail = (await site.web.get(f"/deliveries/{did}", headers=HTML)).text
    assert "&lt;img src=x onerror=alert(2)&gt;" in detail  # business key, body, sample, ledger
    typed = await site.web.post("/publish", data={"event_type": XSS}, headers=site.good)
    assert typed.status_code == 303  # any event type may be published; it is shown escaped
    for path in ["/", typed.headers["location"], "/dlq", "/metrics"]:
        _inert((await site.web.get(path, headers=HTML)).text)
    for form in (
        {"deadline": XSS},
        {"fields": XSS},
    ):
        refused = await site.web.post("/publish", data=form, headers={**site.good, **HTML})
        assert refused.status_code == 400
        _inert(refused.text)
    bad_fault = await site.web.post(
        "/faults", data={"name": XSS, "action": "on"}, headers={**site.good, **HTML}
    )
    assert bad_fault.status_code == 400
    _inert(bad_fault.text)
