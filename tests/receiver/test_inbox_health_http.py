"""The SQLite inbox watched while it runs (over real HTTP) and checked when it starts (a real
``hookproof receiver`` process): no 2xx for events written to a file that is gone, and no start
on a damaged file."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import sqlite3
import subprocess
from pathlib import Path

import httpx
import pytest

from receiver.app import create_app
from receiver.exceptions import InboxUnavailable
from receiver.inbox.contract import Claim, InboxRecord
from receiver.inbox.memory import MemoryInbox
from receiver.inbox.sqlite import SqliteInbox
from receiver.server import running_server
from tests.receiver.http_kit import SECRET, probe, problem_slug, serving, settings, signed
from tests.support.processes import hookproof_argv

BODY = json.dumps({"type": "renewal.reminder_due", "data": {"renewal_id": "ren_1"}}).encode()


def test_a_removed_inbox_folder_turns_answers_into_503_and_health_unhealthy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hookproof.receiver")
    folder = tmp_path / "data"
    folder.mkdir()
    with serving(str(folder / "inbox.sqlite")) as http:
        assert (
            http.post("/webhooks", content=BODY, headers=signed(BODY, "evt_0")).status_code == 200
        )
        assert http.get("/healthz").json() == {"ok": True}
        shutil.rmtree(folder)
        for number in range(1, 6):
            event_id = f"evt_{number}"
            response = http.post("/webhooks", content=BODY, headers=signed(BODY, event_id))
            assert response.status_code == 503, response.text
            assert problem_slug(response) == "inbox-unavailable"
            assert "retry-after" in response.headers
        health = http.get("/healthz")
        assert health.status_code == 503
        assert health.json()["ok"] is False
        assert "is gone" in health.json()["problem"]
    gone = [r for r in caplog.records if "is gone" in r.getMessage() and r.levelno >= logging.ERROR]
    assert len(gone) == 1  # said once, in one line
    assert "\n" not in gone[0].getMessage()


def test_a_replaced_inbox_file_is_detected_too(tmp_path: Path) -> None:
    db = tmp_path / "inbox.sqlite"
    with serving(str(db)) as http:
        assert (
            http.post("/webhooks", content=BODY, headers=signed(BODY, "evt_a")).status_code == 200
        )
        moved = tmp_path / "moved.sqlite"
        db.rename(moved)
        shutil.copyfile(moved, db)  # a file at the path again, but not the one being written
        response = http.post("/webhooks", content=BODY, headers=signed(BODY, "evt_b"))
        assert response.status_code == 503
        assert http.get("/healthz").status_code == 503
        assert probe(http, "evt_a").status_code == 200  # reads still answer


def _damage_inbox_table(db: Path) -> None:
    """Fill an inbox with records, then overwrite the inbox table's pages below its root."""

    async def fill() -> None:
        inbox = SqliteInbox(db)
        try:
            for number in range(400):
                claim = await inbox.claim(f"evt_{number:04d}_" + "x" * 60)
                await inbox.commit(claim.event_id, claim.token, 200)
        finally:
            await inbox.close()

    asyncio.run(fill())
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'hookproof_inbox'"
        ).fetchone()
        pages = [
            page
            for (page,) in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = 'hookproof_inbox' AND pageno != ?",
                (root,),
            )
        ]
    conn.close()
    assert pages, "the inbox table should span several pages"
    with db.open("r+b") as file:
        for page in pages[-3:]:  # the last leaves: opening the file never reads them
            file.seek((page - 1) * page_size + 8)
            file.write(b"\xa5" * (page_size - 16))


@pytest.mark.subprocess
def test_a_damaged_inbox_refuses_to_start_with_one_line_and_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "inbox.sqlite"
    _damage_inbox_table(db)
    argv = hookproof_argv("receiver", "--port", "0", "--db", str(db), "--secret", SECRET)
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "damaged" in lines[0]
    assert "Traceback" not in result.stderr


class _UnreachableInbox(MemoryInbox):
    """A MemoryInbox whose store has gone away (as PostgreSQL during an outage)."""

    async def lookup(self, event_id: str) -> InboxRecord | None:
        raise InboxUnavailable("connection refused")

    async def claim(self, event_id: str) -> Claim:
        raise InboxUnavailable("connection refused")


def test_health_reports_an_unreachable_database() -> None:
    app = create_app(settings(":memory:"), inbox=_UnreachableInbox())
    with running_server(app) as base, httpx.Client(base_url=base, timeout=10) as http:
        health = http.get("/healthz")
        assert health.status_code == 503
        assert health.json() == {
            "ok": False,
            "problem": "the inbox cannot be read: InboxUnavailable: connection refused",
        }
        response = http.post("/webhooks", content=BODY, headers=signed(BODY, "evt_down"))
        assert response.status_code == 503
        assert problem_slug(response) == "inbox-unavailable"
