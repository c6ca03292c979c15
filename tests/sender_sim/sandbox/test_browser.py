"""The dashboard in a real headless Chromium (Playwright over Debian's ``/usr/bin/chromium``): the
seed-002 workflow a developer follows — watch a delivery arrive without reloading, open it and
read the body, toggle a fault and see the next attempt fail, dead-letter one and redrive it from
the DLQ page's form, resend a delivered one. One browser and one dashboard for the module.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import httpx
import pytest

from receiver.server import running_server
from sender_sim import Simulator, SQLiteStore, State, VirtualClock
from sender_sim.sandbox.engine import SandboxEngine
from sender_sim.sandbox.web import create_dashboard
from tests.sender_sim.sandbox.browser import CHROMIUM, CHROMIUM_ARGS, why_no_browser
from tests.sender_sim.test_cli_support import SECRET, ScriptedReceiver

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

_NO_BROWSER = why_no_browser()
pytestmark = pytest.mark.skipif(_NO_BROWSER is not None, reason=_NO_BROWSER or "")

WAIT_MS = 10_000


@dataclass
class Site:
    base: str
    engine: SandboxEngine
    receiver: ScriptedReceiver
    token: str

    def api_publish(self, **document: object) -> str:
        response = httpx.post(
            self.base + "/api/events",
            json=document,
            headers={"origin": self.base, "x-csrf-token": self.token},
        )
        assert response.status_code == 201, response.text
        return str(response.json()["delivery_id"])

    def script(self, *statuses: int) -> None:
        self.receiver.received.clear()
        self.receiver.statuses = list(statuses)


@pytest.fixture(scope="module")
def site(_shared_receiver: ScriptedReceiver) -> Iterator[Site]:
    sim = Simulator(
        SQLiteStore(":memory:"),
        clock=VirtualClock(datetime(2026, 8, 13, 9, tzinfo=UTC)),
    )  # its own HTTP client: the dashboard's lifespan closes it on the server's loop
    sim.add_endpoint("app", _shared_receiver.url, [SECRET])
    engine = SandboxEngine(sim, endpoint_id="app")
    app = create_dashboard(engine)
    with running_server(app) as base:
        yield Site(base, engine, _shared_receiver, app.state.csrf_token)
    sim.store.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser, site: Site) -> Iterator[Page]:
    context = browser.new_context(base_url=site.base, viewport={"width": 1360, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(WAIT_MS)
    opened.on("dialog", lambda dialog: dialog.accept())
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.on(
        "console",
        lambda message: errors.append(message.text) if message.type == "error" else None,
    )
    yield opened
    context.close()
    assert errors == []  # no script error, no CSP violation


def _publish_with_the_form(page: Page, event_type: str) -> str:
    page.goto("/")
    page.select_option("#publish select[name=event_type]", event_type)
    page.click("#publish button")
    page.wait_for_url("**/deliveries/del_*")
    return page.url.rsplit("/", 1)[1]


def test_a_published_event_appears_live_and_its_body_can_be_read(page: Page, site: Site) -> None:
    site.script(200)
    page.goto("/")
    page.evaluate("window.stillTheSamePage = true")
    delivery_id = site.api_publish(event_type="invoice.paid", fields={"note": "from the api"})
    row = page.locator(f'tr[data-id="{delivery_id}"]')
    row.wait_for()
    assert page.evaluate("window.stillTheSamePage") is True  # no reload: the list refreshed
    assert "delivered" in row.inner_text()
    row.locator("a.id").click()
    page.wait_for_url(f"**/deliveries/{delivery_id}")
    assert '"note": "from the api"' in page.locator("#body-pretty").inner_text()
    page.click("text=Byte-exact body")
    exact = page.locator("#body-exact").inner_text()
    assert exact.encode() == site.receiver.received[-1].body
    page.click("#attempts summary")
    headers = page.locator("#attempts table.kv").inner_text()
    assert "<redacted>" in headers
    assert site.receiver.received[-1].headers["webhook-signature"] not in page.content()


def test_a_fault_toggled_on_makes_the_next_attempt_fail(page: Page, site: Site) -> None:
    site.script(200)
    page.goto("/faults")
    row = page.locator('tr[data-fault="lost_response"]')
    row.locator("input[name=options]").fill("attempts=1")
    row.locator("button").click()
    page.wait_for_url("**/faults")
    assert "ON" in page.locator('tr[data-fault="lost_response"]').inner_text()
    delivery_id = _publish_with_the_form(page, "renewal.reminder")
    attempts = page.locator("#attempts > li")
    assert attempts.count() == 2
    assert "timeout" in attempts.nth(0).inner_text()  # the answer was lost: attempt 1 failed
    assert "HTTP 200" in attempts.nth(1).inner_text()
    assert site.engine.sim.delivery(delivery_id).state is State.DELIVERED
    page.goto("/faults")
    page.locator('tr[data-fault="lost_response"] button').click()
    page.wait_for_url("**/faults")
    assert "off" in page.locator('tr[data-fault="lost_response"]').inner_text()


def test_a_dead_letter_is_redriven_from_the_dlq_form(page: Page, site: Site) -> None:
    site.script(410)
    delivery_id = _publish_with_the_form(page, "invoice.paid")
    assert "dead_letter" in page.locator("h1 .pill").inner_text()
    site.script(200)
    page.goto("/dlq")
    page.check(f'input[name=ids][value="{delivery_id}"]')
    assert page.locator("#selected-count").inner_text().startswith("1 selected")
    page.fill("#bulk input[name=actor]", "dev@example.com")
    page.fill("#bulk input[name=reason]", "fixed the handler")
    page.click("button[data-bulk=redrive]")
    page.wait_for_url(f"**/deliveries/{delivery_id}")
    assert "queued 1 delivery" in page.locator("#notice").inner_text()
    assert "delivered" in page.locator("h1 .pill").inner_text()
    assert "REDRIVE by dev@example.com" in page.locator("#ledger").inner_text()


def test_a_delivered_one_is_resent(page: Page, site: Site) -> None:
    # The library's resend (Simulator.resend): one more real attempt of the SAME delivery — same
    # event id and body, signed afresh — not a new delivery as the sandbox's stand-in queued.
    site.script(200)
    delivery_id = _publish_with_the_form(page, "invoice.paid")
    event_id = site.engine.sim.delivery(delivery_id).event_id
    page.fill("#resend-form input[name=actor]", "dev@example.com")
    with page.expect_navigation():
        page.click("#resend-form button")
    assert page.url.rsplit("/", 1)[1] == delivery_id
    notice = page.locator("#notice").inner_text()
    assert "Resend by dev@example.com: queued 1 delivery" in notice
    assert f"{delivery_id}: one more attempt" in notice
    assert "delivered" in page.locator("h1 .pill").inner_text()
    attempts = page.locator("#attempts > li")
    assert attempts.count() == 2
    assert "HTTP 200" in attempts.nth(1).inner_text()
    assert "RESEND requested by dev@example.com" in page.locator("#ledger").inner_text()
    first, second = site.receiver.received
    assert [first.headers["webhook-id"], second.headers["webhook-id"]] == [event_id, event_id]
    assert first.headers["webhook-signature"] != second.headers["webhook-signature"]


def test_an_event_only_row_is_listed_and_resent(page: Page, site: Site) -> None:
    sim = site.engine.sim  # the server is idle between requests: set the scene directly
    sim.add_endpoint("retired", site.receiver.url, [SECRET])
    retired = sim.publish(
        endpoint_id="retired", deadline_at=sim.now() + timedelta(hours=1), business_key="ev_1"
    )
    event_id = sim.delivery(retired).event_id
    sim.delete_endpoint("retired", actor="dev@example.com")  # the event: history_unavailable
    site.script(200)
    page.goto("/?kind=event")
    row = page.locator(f'tr[data-id="{event_id}"]')
    assert row.get_attribute("data-kind") == "event"
    assert row.locator(".kind").inner_text().lower() == "event"  # the row kind is shown
    assert "history_unavailable" in row.inner_text()
    row.locator("a.id").click()
    page.wait_for_url(f"**/events/{event_id}")
    assert "history_unavailable" in page.locator("h1 .pill").inner_text()
    page.fill("#resend-form input[name=actor]", "dev@example.com")
    page.click("#resend-form button")
    page.wait_for_url("**/deliveries/del_*")
    new_id = page.url.rsplit("/", 1)[1]
    assert f"{event_id}: as {new_id}" in page.locator("#notice").inner_text()
    assert "delivered" in page.locator("h1 .pill").inner_text()
    assert sim.delivery(new_id).endpoint_id == "app"
    assert [r.headers["webhook-id"] for r in site.receiver.received] == [event_id]


ROOT = Path(__file__).resolve().parents[3]


def _screenshots_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_screenshots", ROOT / "docs/screenshots.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_screenshots_regenerate(browser: Browser, tmp_path: Path) -> None:
    """docs/screenshots.py still photographs every page the tour in docs/sandbox.md shows."""
    script = _screenshots_script()
    with script.demo_dashboard() as (base, _engine, named):
        written = script.shoot(browser, base, named, tmp_path)
    assert sorted(p.name for p in written) == sorted(f"sandbox-{n}.png" for n in script.PICTURES)
    tour = (ROOT / "docs/sandbox.md").read_text(encoding="utf-8")
    for picture in written:
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert 5_000 < picture.stat().st_size < 400_000
        assert f"(img/{picture.name})" in tour
        assert (ROOT / "docs/img" / picture.name).exists()  # committed next to the tour
