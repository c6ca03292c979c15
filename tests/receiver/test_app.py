"""The reference app: its demo effect, transactional mode on every embedded backend, settings."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from starlette.applications import Starlette

from receiver.app import ReceiverSettings, create_app
from receiver.demo_effect import TABLE
from receiver.exceptions import ConfigurationError
from receiver.inbox.memory import MemoryInbox
from tests.receiver.test_middleware_kit import NOW_S, SECRET, run, signed

TOKEN = "t0ken"
T = TypeVar("T")


def _clock() -> datetime:
    return datetime.fromtimestamp(NOW_S, UTC)


def _settings(db: str, **options: Any) -> ReceiverSettings:
    return ReceiverSettings(secrets=[SECRET.value], db=db, probe_token=TOKEN, **options)


async def _serving(app: Starlette, scenario: Callable[[httpx.AsyncClient], Awaitable[T]]) -> T:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://receiver") as http:
            return await scenario(http)


def _event(event_type: str = "renewal.reminder_due") -> bytes:
    document = {"type": event_type, "timestamp": "2026-01-01T00:00:00Z"}
    return json.dumps({**document, "data": {"renewal_id": "ren_18427"}}).encode()


async def _deliver(http: httpx.AsyncClient, event_id: str, body: bytes) -> httpx.Response:
    return await http.post("/webhooks", content=body, headers=signed(body, event_id))


async def _probe(http: httpx.AsyncClient, event_id: str) -> dict[str, Any]:
    response = await http.get(
        f"/_hookproof/events/{event_id}", headers={"authorization": f"Bearer {TOKEN}"}
    )
    assert response.status_code == 200, response.text
    document: dict[str, Any] = response.json()
    return document


@pytest.mark.parametrize("transactional", [True, False])
@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_each_event_records_one_reminder(tmp_path: Path, backend: str, transactional: bool) -> None:
    db = ":memory:" if backend == "memory" else str(tmp_path / "inbox.sqlite")
    app = create_app(_settings(db, transactional=transactional), clock=_clock)
    body = _event()

    async def scenario(http: httpx.AsyncClient) -> tuple[list[int], dict[str, Any]]:
        statuses = [(await _deliver(http, "evt_app", body)).status_code for _ in range(3)]
        statuses.append((await _deliver(http, "evt_other", body)).status_code)
        return statuses, await _probe(http, "evt_app")

    statuses, probe = run(_serving(app, scenario))
    assert statuses == [200, 200, 200, 200]
    assert probe == {"event_id": "evt_app", "status": "committed", "effects": 1, "deliveries": 3}
    if backend == "sqlite":
        with sqlite3.connect(db) as conn:
            rows = conn.execute(f"SELECT event_id, renewal_id FROM {TABLE} ORDER BY 1").fetchall()
        assert rows == [("evt_app", "ren_18427"), ("evt_other", "ren_18427")]


def test_transactional_reminder_is_written_through_the_inbox_transaction() -> None:
    inbox = MemoryInbox()
    app = create_app(_settings(":memory:"), clock=_clock, inbox=inbox)
    body = _event()
    run(_serving(app, lambda http: _deliver(http, "evt_tx", body)))
    assert inbox.store == {
        f"{TABLE}/evt_tx": [
            {"event_id": "evt_tx", "renewal_id": "ren_18427", "event_type": "renewal.reminder_due"}
        ]
    }


def test_demo_gone_is_410_stored_and_repeated() -> None:
    app = create_app(_settings(":memory:"), clock=_clock)
    body = _event("hookproof.demo.gone")

    async def scenario(http: httpx.AsyncClient) -> tuple[int, int, dict[str, Any]]:
        first = await _deliver(http, "evt_gone", body)
        second = await _deliver(http, "evt_gone", body)
        return first.status_code, second.status_code, await _probe(http, "evt_gone")

    first, second, probe = run(_serving(app, scenario))
    assert (first, second) == (410, 410)
    assert probe["effects"] == 0  # no reminder for an event the receiver refused for good


def test_demo_unavailable_is_released_for_a_retry() -> None:
    app = create_app(_settings(":memory:"), clock=_clock)
    body = _event("hookproof.demo.unavailable")

    async def scenario(http: httpx.AsyncClient) -> tuple[int, dict[str, Any]]:
        response = await _deliver(http, "evt_503", body)
        return response.status_code, await _probe(http, "evt_503")

    status, probe = run(_serving(app, scenario))
    assert status == 503
    assert probe["status"] == "in_flight"


def test_a_body_that_is_not_json_is_a_400_problem() -> None:
    app = create_app(_settings(":memory:"), clock=_clock)
    body = b"\xff not json"
    response = run(_serving(app, lambda http: _deliver(http, "evt_bad", body)))
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/problem+json"


def test_health_answers_once_the_inbox_is_open() -> None:
    app = create_app(_settings(":memory:"), clock=_clock)
    response = run(_serving(app, lambda http: http.get("/healthz")))
    assert (response.status_code, response.json()) == (200, {"ok": True})


def test_before_the_lifespan_the_inbox_is_unavailable() -> None:
    app = create_app(_settings(":memory:"), clock=_clock)
    body = _event()

    async def scenario() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://receiver") as http:
            return await _deliver(http, "evt_early", body)

    response = run(scenario())
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"path": "webhooks"}, "must start with '/'"),
        ({"probe_prefix": "/"}, "probe prefix"),
        ({"max_body": 0}, "at least 1 byte"),
        ({"probe_token": " "}, "probe token"),
    ],
)
def test_bad_settings_are_configuration_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ReceiverSettings(secrets=[SECRET.value], **options)


def test_a_bad_secret_fails_when_the_app_is_built() -> None:
    with pytest.raises(ConfigurationError, match="whsec_"):
        create_app(ReceiverSettings(secrets=["whsec_!!notbase64"]))


def test_settings_never_show_secrets() -> None:
    settings = ReceiverSettings(secrets=[SECRET.value], probe_token=TOKEN)
    assert SECRET.value not in repr(settings)
    assert TOKEN not in repr(settings)


NUL_EVENT = b'{"type":"renewal\\u0000due","data":{"renewal_id":"ren_\\u0000"}}'
"""A genuine event whose JSON strings hold ``\\u0000``: valid JSON, and text PostgreSQL cannot
hold as it is."""


@pytest.mark.postgres
@pytest.mark.parametrize("transactional", [True, False])
def test_reminders_on_postgresql_once_each_a_nul_escape_included(
    postgres_dsn: str, transactional: bool
) -> None:
    import uuid

    import psycopg

    schema = f"hp_app_{uuid.uuid4().hex[:10]}"
    separator = "&" if "?" in postgres_dsn else "?"
    location = f"{postgres_dsn}{separator}schema={schema}"
    app = create_app(_settings(location, transactional=transactional), clock=_clock)

    async def scenario(http: httpx.AsyncClient) -> tuple[list[int], list[dict[str, Any]]]:
        statuses = [(await _deliver(http, "evt_pg", _event())).status_code for _ in range(2)]
        statuses += [(await _deliver(http, "evt_nul", NUL_EVENT)).status_code for _ in range(2)]
        return statuses, [await _probe(http, "evt_pg"), await _probe(http, "evt_nul")]

    try:
        statuses, probes = run(_serving(app, scenario))
        assert statuses == [200, 200, 200, 200]
        assert [(p["status"], p["effects"], p["deliveries"]) for p in probes] == [
            ("committed", 1, 2),
            ("committed", 1, 2),
        ]
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            rows = conn.execute(
                f'SELECT event_id, renewal_id, event_type FROM "{schema}".{TABLE} ORDER BY 1'
            ).fetchall()
        assert rows == [
            ("evt_nul", "ren_\ufffd", "renewal\ufffddue"),
            ("evt_pg", "ren_18427", "renewal.reminder_due"),
        ]
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_every_store_holds_a_nul_escape_alike(tmp_path: Path) -> None:
    db = str(tmp_path / "inbox.sqlite")
    app = create_app(_settings(db), clock=_clock)

    async def scenario(http: httpx.AsyncClient) -> int:
        return (await _deliver(http, "evt_nul", NUL_EVENT)).status_code

    assert run(_serving(app, scenario)) == 200
    with sqlite3.connect(db) as conn:
        rows = conn.execute(f"SELECT renewal_id, event_type FROM {TABLE}").fetchall()
    assert rows == [("ren_\ufffd", "renewal\ufffddue")]


def test_running_server_serves_over_loopback_and_reports_a_failed_start(tmp_path: Path) -> None:
    from receiver.server import running_server

    app = create_app(_settings(":memory:"))
    with running_server(app) as base_url:
        assert base_url.startswith("http://127.0.0.1:")
        assert httpx.get(f"{base_url}/healthz").json() == {"ok": True}
    broken = create_app(_settings(str(tmp_path / "missing-dir" / "inbox.sqlite")))
    with pytest.raises(ConfigurationError, match="failed to start"), running_server(broken):
        pass


NO_EVENT_IDS = ("%00", "evt%00x", "evt%20x", "%C3%A9v", "e" * 256, "%01%7F")
"""Probe paths naming ids no delivery can carry: a NUL (PostgreSQL refuses it in a query), other
control characters, a space, non-ASCII, one character over the length limit."""


def _refuses_ids_no_delivery_carries(db: str) -> None:
    app = create_app(_settings(db), clock=_clock)

    async def scenario(http: httpx.AsyncClient) -> list[tuple[int, str]]:
        answers = []
        for name in NO_EVENT_IDS:
            response = await http.get(
                f"/_hookproof/events/{name}", headers={"authorization": f"Bearer {TOKEN}"}
            )
            answers.append((response.status_code, response.json()["type"]))
        return answers

    answers = run(_serving(app, scenario))
    assert answers == [(404, "https://hookproof.dev/problems/event-not-found")] * len(NO_EVENT_IDS)


def test_the_probe_answers_404_to_an_id_no_delivery_can_carry(tmp_path: Path) -> None:
    _refuses_ids_no_delivery_carries(str(tmp_path / "inbox.sqlite"))


@pytest.mark.postgres
def test_the_probe_on_postgresql_answers_404_to_a_nul_in_the_id(postgres_dsn: str) -> None:
    import uuid

    import psycopg

    schema = f"hp_app_{uuid.uuid4().hex[:10]}"
    separator = "&" if "?" in postgres_dsn else "?"
    try:
        _refuses_ids_no_delivery_carries(f"{postgres_dsn}{separator}schema={schema}")
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
