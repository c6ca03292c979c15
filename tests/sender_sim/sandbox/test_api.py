"""The dashboard's JSON API and CSV export over ``httpx.ASGITransport``, the engine sending real
HTTP to the module's scripted loopback receiver: publish, list with filters, the delivery with
its request as sent (signature redacted), resend 1–100 atomic with its stable refusal code,
redrive, faults, metrics, the CSV export and its 5000-row refusal."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest

from sender_sim import State
from sender_sim.sandbox import queries
from sender_sim.sandbox.engine import SandboxEngine
from sender_sim.simulator import Publication
from tests.sender_sim.sandbox.dashboards import sandbox_dashboard
from tests.sender_sim.test_cli_support import SECRET, ScriptedReceiver

pytestmark = pytest.mark.anyio


class Api:
    def __init__(self, engine: SandboxEngine, web: httpx.AsyncClient) -> None:
        self.engine = engine
        self.web = web

    async def publish(self, **document: object) -> str:
        response = await self.web.post("/api/events", json=document)
        assert response.status_code == 201, response.text
        return str(response.json()["delivery_id"])


@pytest.fixture
async def api(receiver: ScriptedReceiver) -> AsyncIterator[Api]:
    async with sandbox_dashboard(receiver) as (engine, app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as web:
            token = (await web.get("/api/csrf")).json()["token"]
            web.headers.update({"origin": "http://127.0.0.1", "x-csrf-token": token})
            yield Api(engine, web)


async def test_publish_list_filters_and_the_delivery_as_sent(
    api: Api, receiver: ScriptedReceiver
) -> None:
    receiver.statuses = [200, 410]
    ok = await api.publish(event_type="invoice.paid", fields={"amount": 5})
    gone = await api.publish(event_type="renewal.reminder", business_key="ren_x")
    listed = (await api.web.get("/api/deliveries")).json()["rows"]
    assert [r["delivery_id"] for r in listed] == [gone, ok]  # newest first
    by_status = (await api.web.get("/api/deliveries?status=dead_letter")).json()["rows"]
    assert [r["delivery_id"] for r in by_status] == [gone]
    by_class = (await api.web.get("/api/deliveries?http_class=2xx")).json()["rows"]
    assert [r["delivery_id"] for r in by_class] == [ok]
    by_key = (await api.web.get("/api/deliveries?business_key=ren_x")).json()["rows"]
    assert [r["delivery_id"] for r in by_key] == [gone]
    assert (await api.web.get("/api/deliveries?endpoint_id=other")).json()["rows"] == []
    late = (await api.web.get("/api/deliveries?event_from=2026-08-14T00:00")).json()["rows"]
    assert late == []
    early = (await api.web.get("/api/deliveries?delivered_to=2026-08-13T10:00Z")).json()["rows"]
    assert len(early) == 2
    bad = await api.web.get("/api/deliveries?status=lost")
    assert bad.status_code == 400
    assert "unknown status" in bad.json()["detail"]

    detail = (await api.web.get(f"/api/deliveries/{ok}")).json()
    assert detail["status"] == "delivered"
    assert detail["body"].encode() == receiver.received[0].body
    (attempt,) = detail["attempts"]
    assert attempt["status"] == 200
    assert attempt["request_captured"] is True
    headers = attempt["request_headers"]
    assert headers["webhook-id"] == receiver.received[0].headers["webhook-id"]
    assert headers["webhook-signature"] == "<redacted>"
    assert receiver.received[0].headers["webhook-signature"] not in str(detail)
    assert detail["actions"]["resend"]["possible"] is True
    assert detail["actions"]["redrive"] == {
        "possible": False,
        "why_not": "only a dead letter can be redriven; it was delivered",
    }
    assert (await api.web.get("/api/deliveries/del_nope")).status_code == 404


async def test_resend_is_atomic_with_a_stable_refusal_code(
    api: Api, receiver: ScriptedReceiver
) -> None:
    """The library's resend (Simulator.resend): its refusal code and reasons, and one more real
    attempt of the same delivery (not a new delivery, as the sandbox's stand-in queued)."""
    done = await api.publish(event_type="invoice.paid")
    pending = api.engine.publish("invoice.paid")  # not run: still scheduled
    before = len(api.engine.deliveries())
    refused = await api.web.post(
        "/api/deliveries/resend", json={"ids": [done, pending], "actor": "ops@example.com"}
    )
    assert refused.status_code == 409
    problem = refused.json()
    assert problem["code"] == "WEBHOOK_DELIVERY_NOT_REPLAYABLE"
    assert problem["ineligible"] == {pending: "pending"}  # the library's reason
    assert len(api.engine.deliveries()) == before  # nothing queued
    assert api.engine.sim.delivery(done).attempt == 1

    for body, status, detail in [
        ({"ids": [], "actor": "a"}, 409, "1 to 100"),
        ({"ids": [f"del_{i}" for i in range(101)], "actor": "a"}, 409, "1 to 100"),
        ({"ids": ["del_nope"], "actor": "a"}, 409, "del_nope: not_found"),
        ({"ids": [done], "actor": ""}, 400, "actor"),
        ({"ids": "nope", "actor": "a"}, 400, "list"),
    ]:
        response = await api.web.post("/api/deliveries/resend", json=body)
        assert response.status_code == status, body
        assert detail in response.json()["detail"]

    receiver.received.clear()
    queued = await api.web.post(
        "/api/deliveries/resend", json={"ids": [done], "actor": "ops@example.com"}
    )
    assert queued.status_code == 202
    answer = queued.json()
    assert answer["by_id"] == {done: [done]}
    assert (answer["delivery_ids"], answer["new_delivery_ids"]) == ([done], [])
    resent = api.engine.sim.delivery(done)
    assert (resent.state, resent.attempt, resent.resends) == (State.DELIVERED, 2, 1)
    (sent,) = [r for r in receiver.received if r.headers["hookproof-delivery-id"] == done]
    assert sent.headers["webhook-id"] == resent.event_id  # the same event: receivers dedupe
    ledger = [r.cause for r in api.engine.sim.ledger(done)]
    assert "resent" in ledger


async def test_event_only_rows_are_listed_and_resent_through_the_library(
    api: Api, receiver: ScriptedReceiver
) -> None:
    sim = api.engine.sim
    sim.add_endpoint("old", receiver.url, [SECRET])
    gone = sim.publish(
        endpoint_id="old", deadline_at=sim.now() + timedelta(hours=1), event_type="invoice.paid"
    )
    event_id = sim.delivery(gone).event_id
    assert sim.event(event_id).status is None  # read (and cached) before the deletion
    sim.delete_endpoint("old", actor="ops@example.com")  # the event: history_unavailable
    assert sim.event(event_id).status == "history_unavailable"
    kept = await api.publish(event_type="invoice.paid")

    rows = (await api.web.get("/api/deliveries")).json()["rows"]
    assert [(r["kind"], r["status"], r["delivery_id"]) for r in rows] == [
        ("delivery", "delivered", kept),
        ("event", "history_unavailable", None),
    ]
    only = (await api.web.get("/api/deliveries?kind=event")).json()["rows"]
    assert [r["event_id"] for r in only] == [event_id]
    page = await api.web.get("/")
    assert f'href="/events/{event_id}"' in page.text
    assert "history_unavailable" in page.text
    event_page = await api.web.get(f"/events/{event_id}")
    assert event_page.status_code == 200
    assert 'id="resend-form"' in event_page.text
    detail = (await api.web.get(f"/api/events/{event_id}")).json()
    assert detail["status"] == "history_unavailable"
    assert detail["actions"]["resend"] == {"possible": True, "why_not": ""}
    assert (await api.web.get("/api/events/evt_nope")).status_code == 404

    receiver.received.clear()
    queued = await api.web.post(
        "/api/deliveries/resend", json={"ids": [event_id], "actor": "ops@example.com"}
    )
    assert queued.status_code == 202
    (new,) = queued.json()["by_id"][event_id]
    assert queued.json()["new_delivery_ids"] == [new]
    delivered = sim.delivery(new)
    assert (delivered.endpoint_id, delivered.state) == ("app", State.DELIVERED)
    assert [r.headers["webhook-id"] for r in receiver.received] == [event_id]
    assert sim.event(event_id).status is None  # no longer event-only
    again = (await api.web.get(f"/api/events/{event_id}")).json()
    assert again["actions"]["resend"]["possible"] is False
    assert again["actions"]["resend"]["why_not"] == "not_event_only_or_dead_letter"


async def test_redrive_faults_and_metrics(api: Api, receiver: ScriptedReceiver) -> None:
    receiver.statuses = [410, 200]
    gone = await api.publish(event_type="renewal.reminder")
    assert (await api.web.get("/api/dlq")).json() == {
        "by_reason": {"permanent_response": {"ren_1": 1}}
    }
    redriven = await api.web.post(
        "/api/deliveries/redrive",
        json={"ids": [gone], "actor": "ops", "reason": "fixed", "deadline": "+1h"},
    )
    assert redriven.status_code == 202
    assert redriven.json()["queued"] == [gone]
    assert api.engine.sim.delivery(gone).state is State.DELIVERED
    again = await api.web.post(
        "/api/deliveries/redrive",
        json={"ids": [gone], "actor": "ops", "reason": "again", "deadline": "+1h"},
    )
    assert again.status_code == 409
    on = await api.web.post("/api/faults", json={"name": "lost_response", "on": True})
    assert on.json()["faults"]["lost_response"] == "lost_response"
    off = await api.web.post("/api/faults", json={"name": "lost_response", "on": False})
    assert off.json()["faults"]["lost_response"] is None
    bad = await api.web.post("/api/faults", json={"name": "gremlins", "on": True})
    assert bad.status_code == 400
    metrics = (await api.web.get("/api/metrics")).json()
    assert metrics["states"] == {"delivered": 1}
    assert metrics["threatened"] == []
    assert (await api.web.post("/api/events", content=b"x=1")).status_code == 415


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


async def test_csv_export_of_the_filtered_view_and_its_cap(
    api: Api, receiver: ScriptedReceiver
) -> None:
    receiver.statuses = [200, 410]
    ok = await api.publish(event_type="invoice.paid")
    gone = await api.publish(event_type="renewal.reminder")
    every = await api.web.get("/export.csv")
    assert every.status_code == 200
    assert every.headers["content-type"].startswith("text/csv")
    assert {r["delivery_id"] for r in _csv(every.text)} == {ok, gone}
    dead = _csv((await api.web.get("/api/deliveries/export.csv?status=dead_letter")).text)
    # the library's CSV columns (no last_status: the HTTP class of the last answer)
    assert list(dead[0]) == list(queries.CSV_COLUMNS)
    assert [(r["delivery_id"], r["reason"], r["http_class"]) for r in dead] == [
        (gone, "permanent_response", "4xx")
    ]

    now = api.engine.sim.now()
    many = [
        Publication(endpoint_id="app", deadline_at=now + timedelta(days=1), business_key="bulk")
        for _ in range(queries.EXPORT_LIMIT)
    ]
    api.engine.sim.publish_many(many)  # not run: scheduled
    exactly = await api.web.get("/export.csv?business_key=bulk")
    assert exactly.status_code == 200
    assert exactly.headers["x-row-count"] == str(queries.EXPORT_LIMIT)
    for path in ["/export.csv", "/api/deliveries/export.csv?event_from=2026-08-13T00:00"]:
        refused = await api.web.get(path)
        assert refused.status_code == 422
        assert refused.headers["content-type"] == "application/problem+json"
        problem = refused.json()
        assert problem["code"] == "EXPORT_TOO_LARGE"
        assert problem["limit"] == queries.EXPORT_LIMIT
        assert problem["count"] > queries.EXPORT_LIMIT


async def test_the_endpoints_url_credentials_are_sent_but_never_shown(
    receiver: ScriptedReceiver,
) -> None:
    password, token = "pa55-w0rd-long", "tok-9f8e7d6c5b"
    url = receiver.url.replace("http://", f"http://alice:{password}@") + f"?token={token}"
    async with sandbox_dashboard(receiver, url) as (_, app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as web:
            csrf = (await web.get("/api/csrf")).json()["token"]
            web.headers.update({"origin": "http://127.0.0.1", "x-csrf-token": csrf})
            published = await web.post("/api/events", json={"event_type": "invoice.paid"})
            delivery_id = published.json()["delivery_id"]
            shown = [
                (await web.get(path)).text
                for path in ("/", f"/deliveries/{delivery_id}", f"/api/deliveries/{delivery_id}")
            ]
    assert receiver.received, "the delivery was sent"
    assert receiver.received[0].headers["authorization"].startswith("Basic ")
    detail = shown[-1]
    assert "alice:&lt;redacted&gt;@" in shown[1]  # the page shows where it went, escaped
    assert "token=<redacted>" in detail
    for text in shown:
        assert password not in text
        assert token not in text


async def test_json_nested_past_the_stack_is_a_400_problem(api: Api) -> None:
    deep = b'{"event_type": "a", "fields": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = await api.web.post(
        "/api/events", content=deep, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["type"].endswith("/sandbox-bad-json")
