"""Regenerate the pictures in docs/sandbox.md: ``python docs/screenshots.py`` (from the repository
root, with the test extra installed and Debian's ``chromium``).

It runs a sandbox dashboard over a virtual clock against a scripted loopback receiver, plays a
short session (deliveries that succeed, retry, time out under a fault and dead-letter), and
photographs each page with headless Chromium into ``docs/img/sandbox-*.png``. The browser tests
run :func:`shoot` too (into a temporary directory), so CI proves the script still works.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from receiver.server import running_server  # noqa: E402
from sender_sim import Simulator, SQLiteStore, VirtualClock  # noqa: E402
from sender_sim.sandbox.engine import SandboxEngine  # noqa: E402
from sender_sim.sandbox.web import create_dashboard  # noqa: E402
from tests.sender_sim.sandbox.browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.sender_sim.test_cli_support import SECRET, ScriptedReceiver, scripted  # noqa: E402

if TYPE_CHECKING:
    from playwright.sync_api import Browser

OUT = ROOT / "docs" / "img"
VIEWPORT = {"width": 1280, "height": 800}
PICTURES = ("overview", "delivery", "dlq", "faults", "metrics")


@contextmanager
def demo_dashboard() -> Iterator[tuple[str, SandboxEngine, dict[str, str]]]:
    """A dashboard with a short session played on it: (base URL, engine, named delivery ids)."""
    with scripted(200) as receiver:
        sim = Simulator(
            SQLiteStore(":memory:"), clock=VirtualClock(datetime(2026, 8, 13, 9, tzinfo=UTC))
        )
        sim.add_endpoint("app", receiver.url, [SECRET])
        engine = SandboxEngine(sim, endpoint_id="app")
        with running_server(create_dashboard(engine)) as base:
            yield base, engine, _play(base, engine, receiver)
        sim.store.close()


def _play(base: str, engine: SandboxEngine, receiver: ScriptedReceiver) -> dict[str, str]:
    import httpx

    token = httpx.get(base + "/api/csrf").json()["token"]
    headers = {"origin": base, "x-csrf-token": token}

    def publish(statuses: list[int], **document: object) -> str:
        receiver.received.clear()
        receiver.statuses = statuses
        response = httpx.post(base + "/api/events", json=document, headers=headers)
        response.raise_for_status()
        return str(response.json()["delivery_id"])

    named = {}
    for amount in (1200, 4900):
        publish([200], event_type="invoice.paid", fields={"amount": amount, "currency": "eur"})
    named["retried"] = publish(
        [503, 503, 200], event_type="invoice.paid", fields={"amount": 990, "currency": "eur"}
    )
    named["gone"] = publish([410], event_type="renewal.reminder")
    publish([401], event_type="renewal.reminder")
    httpx.post(
        base + "/api/faults",
        json={"name": "lost_response", "on": True, "options": "attempts=1"},
        headers=headers,
    )
    publish([200], event_type="renewal.reminder")
    engine.publish("invoice.paid", {"amount": 15})  # not run yet: shows as scheduled
    return named


def shoot(browser: Browser, base: str, named: dict[str, str], out: Path) -> list[Path]:
    """Photograph every page into ``out``; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(base_url=base, viewport=VIEWPORT, device_scale_factor=1)
    page = context.new_page()
    written = []

    def snap(name: str, path: str, *, height: int | None = None) -> None:
        page.goto(path)
        page.wait_for_load_state("networkidle")
        target = out / f"sandbox-{name}.png"
        if height is None:
            page.screenshot(path=str(target))
        else:  # a taller picture than the window, cut where the page's story is told
            clip = {"x": 0, "y": 0, "width": VIEWPORT["width"], "height": height}
            page.screenshot(path=str(target), full_page=True, clip=clip)
        written.append(target)

    snap("overview", "/")
    snap("delivery", f"/deliveries/{named['retried']}", height=1250)
    snap("dlq", "/dlq")
    page.check(f'input[name=ids][value="{named["gone"]}"]')
    page.fill("#bulk input[name=actor]", "dev@example.com")
    page.fill("#bulk input[name=reason]", "fixed the 410 in the handler")
    page.screenshot(path=str(out / "sandbox-dlq.png"))
    snap("faults", "/faults")
    snap("metrics", "/metrics")
    context.close()
    return written


def main() -> int:
    from playwright.sync_api import sync_playwright

    with demo_dashboard() as (base, _engine, named), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for path in shoot(browser, base, named, OUT):
            print(path.relative_to(ROOT), path.stat().st_size, "bytes")
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
