"""The sandbox dashboard through ``httpx.ASGITransport``: pages, forms, refusals. The engine behind
it sends real HTTP to a scripted receiver on a loopback port."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from datetime import timedelta

import httpx
import pytest
from markupsafe import escape

from sender_sim import State
from sender_sim.sandbox.engine import FAULT_EFFECT, FAULT_NAMES, SandboxEngine
from tests.sender_sim.sandbox.dashboards import sandbox_dashboard
from tests.sender_sim.test_cli_support import SECRET, ScriptedReceiver

pytestmark = pytest.mark.anyio

FORM = {"content-type": "application/x-www-form-urlencoded"}
HTML = {"accept": "text/html"}


class Board:
    def __init__(self, engine: SandboxEngine, web: httpx.AsyncClient) -> None:
        self.engine = engine
        self.web = web

    async def page(self, path: str) -> str:
        response = await self.web.get(path, headers=HTML)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/html")
        assert SECRET not in response.text
        assert SECRET.removeprefix("whsec_") not in response.text
        return response.text

    async def post(
        self, path: str, data: Mapping[str, str | list[str]], **headers: str
    ) -> httpx.Response:
        return await self.web.post(path, data=data, headers=headers)


@pytest.fixture
async def board(receiver: ScriptedReceiver) -> AsyncIterator[Board]:
    async with sandbox_dashboard(receiver) as (engine, app):
        transport = httpx.ASGITransport(app=app)
        # the dashboard's own page would send these two on every state-changing request
        same_site = {"origin": "http://127.0.0.1", "x-csrf-token": app.state.csrf_token}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=same_site
        ) as web:
            yield Board(engine, web)


async def test_overview_lists_forms_faults_and_nothing_yet(board: Board) -> None:
    text = await board.page("/")
    assert '<form method="post" action="/publish"' in text
    assert "No deliveries yet." in text
    assert "No dead letters." in text
    faults = await board.page("/faults")
    for name in FAULT_NAMES:
        assert f'<td class="mono">{name}</td>' in faults
        assert f'<td class="small">{escape(FAULT_EFFECT[name])}</td>' in faults
    assert "virtual time" in text


async def test_publish_form_delivers_and_the_delivery_page_tells_it(
    board: Board, receiver: ScriptedReceiver
) -> None:
    response = await board.post(
        "/publish",
        {
            "event_type": "invoice.paid",
            "fields": "amount=5 note='hi there'",
            "business_key": "",
            "deadline": "+2h",
        },
    )
    assert response.status_code == 303
    location = response.headers["location"]
    assert location.startswith("/deliveries/del_")
    delivery_id = location.rsplit("/", 1)[1]
    assert board.engine.sim.delivery(delivery_id).state is State.DELIVERED
    assert len(receiver.received) == 1
    assert b'"note":"hi there"' in receiver.received[0].body
    text = await board.page(location)
    assert '<span class="pill delivered">delivered</span>' in text
    assert "<h2>Attempts</h2>" in text
    assert '<span class="answer tone-ok">HTTP 200</span>' in text
    assert "scheduled -&gt; leased" in text
    assert "leased -&gt; delivered" in text
    assert "Story:" not in text  # the ledger is shown once, not retold
    assert 'action="/redrive"' not in text  # only dead letters get a redrive form
    facts = text.split('<dl class="facts">', 1)[1].split("</dl>", 1)[0]
    assert f'<code class="url">{receiver.url}</code>' in facts  # the id "app" is not its URL
    overview = await board.page("/")
    assert delivery_id in overview
    assert "in_1" in overview


async def test_an_endpoint_named_by_its_url_shows_the_url_once(
    board: Board, receiver: ScriptedReceiver
) -> None:
    """``hookproof sandbox`` names the endpoint by its URL unless told otherwise: the delivery
    page then says it once, not as the id and again as the URL."""
    sim = board.engine.sim
    sim.add_endpoint(receiver.url, receiver.url, [SECRET])
    delivery_id = sim.publish(
        endpoint_id=receiver.url, deadline_at=sim.now() + timedelta(hours=1), data={"amount": 1}
    )
    text = await board.page(f"/deliveries/{delivery_id}")
    facts = text.split('<dl class="facts">', 1)[1].split("</dl>", 1)[0]
    assert facts.count(receiver.url) == 1


async def test_an_answer_is_not_named_twice_when_its_class_is_its_kind(board: Board) -> None:
    """A lost response is a timeout, classified ``timeout``: the list and the delivery page say
    it once; a 200 keeps its class (``success``) beside the status."""
    await board.post("/faults", {"name": "lost_response", "action": "on", "options": ""})
    lost = await board.post("/publish", {"event_type": "invoice.paid", "deadline": "+2h"})
    await board.post("/faults", {"name": "lost_response", "action": "off", "options": ""})
    await board.post("/publish", {"event_type": "invoice.paid", "deadline": "+2h"})
    overview = await board.page("/")
    assert '<span class="muted small">timeout</span>' not in overview
    assert '<span class="muted small">success</span>' in overview
    detail = await board.page(lost.headers["location"])
    assert '<span class="pill plainpill">timeout</span>' not in detail
    assert "timeout: the response was lost (fault)" in detail


async def test_fault_toggles(board: Board) -> None:
    on = await board.post(
        "/faults", {"name": "crash_after_send", "action": "on", "options": "attempts=1"}
    )
    assert on.status_code == 303
    assert board.engine.faults()["crash_after_send"] == "crash_after_send:attempts=1"
    assert "<code>crash_after_send:attempts=1</code>" in await board.page("/faults")
    published = await board.post("/publish", {"event_type": "renewal.reminder"})
    text = await board.page(published.headers["location"])
    assert "FAULT injected: crash_after_send on attempt 1" in text
    assert "acked: NO (stale or crashed)" in text
    off = await board.post("/faults", {"name": "crash_after_send", "action": "off"})
    assert off.status_code == 303
    assert board.engine.faults()["crash_after_send"] is None


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        ({"name": "gremlins", "action": "on"}, "unknown fault 'gremlins'"),
        ({"name": "lost_response", "action": "maybe"}, "action must be on or off"),
        ({"name": "lost_response", "action": "on", "options": "p=9"}, "probability"),
    ],
)
async def test_bad_fault_forms_are_problems(
    board: Board, data: dict[str, str], detail: str
) -> None:
    response = await board.post("/faults", data)
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == 400
    assert problem["type"].endswith("/sandbox-bad-fault")
    assert detail in problem["detail"]
    page = await board.web.post("/faults", data=data, headers=HTML)
    assert page.status_code == 400
    assert page.headers["content-type"].startswith("text/html")


async def test_dlq_pages_and_the_audited_redrive_form(
    board: Board, receiver: ScriptedReceiver
) -> None:
    receiver.statuses = [410, 410, 200]
    first = (await board.post("/publish", {"event_type": "renewal.reminder"})).headers["location"]
    await board.post("/publish", {"event_type": "invoice.paid"})
    gone = first.rsplit("/", 1)[1]
    text = await board.page("/")
    assert 'href="/dlq?reason=permanent_response"' in text
    assert 'href="/dlq?reason=permanent_response&amp;business_key=ren_1"' in text
    dlq = await board.page("/dlq")
    assert gone in dlq
    assert "2 shown. Tick the leftmost boxes" in dlq
    filtered = await board.page("/dlq?reason=permanent_response&business_key=in_2")
    assert gone not in filtered
    assert "in_2" in filtered
    assert "No dead letters match." in await board.page("/dlq?reason=deadline_exhausted")
    bad = await board.web.get("/dlq?reason=bored")
    assert bad.status_code == 400
    assert bad.headers["content-type"] == "application/problem+json"

    detail = await board.page(first)
    assert 'action="/redrive"' in detail
    missing = await board.post(
        "/redrive", {"ids": gone, "actor": "", "reason": "r", "deadline": "+1h"}
    )
    assert missing.status_code == 400
    assert "actor" in missing.json()["detail"]
    nothing = await board.post("/redrive", {"actor": "a", "reason": "r", "deadline": "+1h"})
    assert nothing.status_code == 400
    done = await board.post(
        "/redrive", {"ids": gone, "actor": "ops@example.com", "reason": "fixed", "deadline": "+1h"}
    )
    assert done.status_code == 303
    assert done.headers["location"] == first
    assert board.engine.sim.delivery(gone).state is State.DELIVERED
    story = await board.page(first)
    assert "REDRIVE by ops@example.com" in story
    again = await board.post(
        "/redrive", {"ids": gone, "actor": "ops@example.com", "reason": "again", "deadline": "+1h"}
    )
    assert again.status_code == 409
    assert again.json()["type"].endswith("/sandbox-redrive-refused")
    assert "not a dead letter" in again.json()["detail"]


async def test_unknown_delivery_is_404(board: Board) -> None:
    response = await board.web.get("/deliveries/del_nope")
    assert response.status_code == 404
    assert response.json()["detail"] == "no delivery 'del_nope'"
    page = await board.web.get("/deliveries/del_nope", headers=HTML)
    assert page.status_code == 404
    assert "no delivery &#39;del_nope&#39;" in page.text


async def test_foreign_hosts_origins_and_bodies_are_refused(board: Board) -> None:
    data = {"event_type": "renewal.reminder"}
    evil_host = await board.web.post("/publish", data=data, headers={"host": "evil.example"})
    assert evil_host.status_code == 403
    evil_origin = await board.post("/publish", data, origin="http://evil.example")
    assert evil_origin.status_code == 403
    same_origin = await board.post("/publish", data, origin="http://127.0.0.1")
    assert same_origin.status_code == 303
    as_json = await board.web.post("/publish", json=data)
    assert as_json.status_code == 415
    not_utf8 = await board.web.post("/publish", content=b"fields=%FF\xff", headers=FORM)
    assert not_utf8.status_code == 400
    unbalanced = await board.post("/publish", {"fields": "note='unclosed"})
    assert unbalanced.status_code == 400
    bad_deadline = await board.post("/publish", {"deadline": "whenever"})
    assert bad_deadline.status_code == 400
    assert bad_deadline.json()["type"].endswith("/sandbox-bad-publish")
    wrong_method = await board.web.get("/publish")
    assert wrong_method.status_code == 405
    assert len(board.engine.deliveries()) <= 2


async def test_everything_shown_is_escaped(board: Board) -> None:
    response = await board.post(
        "/publish", {"event_type": "<b>x</b>", "business_key": "<script>alert(1)</script>"}
    )
    assert response.status_code == 303
    text = await board.page("/")
    assert "<script>alert(1)</script>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<b>x</b>" not in text
