"""``hookproof endpoints``, ``deliveries``, ``resend``, ``metrics`` and ``shadow`` through the root
CLI, against a scripted loopback receiver, plus the notes about the simulated clock."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from conformance.cli import main
from sender_sim import SQLiteStore
from sender_sim.commands.support import DEFAULT_DB
from tests.sender_sim.test_cli_support import SECRET, ScriptedReceiver

Capsys = pytest.CaptureFixture[str]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HOOKPROOF_SECRET", raising=False)


def _run(capsys: Capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _json(capsys: Capsys, *argv: str) -> Any:
    code, out, err = _run(capsys, *argv, "--json")
    assert err == "", err
    return code, json.loads(out)


def _send(capsys: Capsys, url: str, *extra: str) -> dict[str, Any]:
    _, document = _json(capsys, "send", url, "--secret", SECRET, "--endpoint-id", "shop", *extra)
    assert isinstance(document, dict)
    return document


def test_endpoints_add_list_disable_delete_and_history(
    receiver: ScriptedReceiver, capsys: Capsys
) -> None:
    code, out, _ = _run(
        capsys, "endpoints", "add", "shop", receiver.url, "--secret", SECRET, "--actor", "alice",
        "--event-type", "renewal.reminder", "--timeout", "2.5",
    )  # fmt: skip
    assert code == 0
    assert "timeout 2.5 s" in out
    code, listed = _json(capsys, "endpoints", "list")
    assert [(e["endpoint_id"], e["event_types"], e["timeout_s"]) for e in listed] == [
        ("shop", ["renewal.reminder"], 2.5)
    ]
    assert _run(capsys, "endpoints", "disable", "shop", "--actor", "bob")[0] == 0
    assert _run(capsys, "endpoints", "delete", "shop", "--actor", "carol")[0] == 0
    code, history = _json(capsys, "endpoints", "history", "shop")
    assert [(h["action"], h["actor"]) for h in history] == [
        ("created", "alice"),
        ("disabled", "bob"),
        ("deleted", "carol"),
    ]
    assert SECRET not in json.dumps(history)
    code, _, err = _run(capsys, "endpoints", "disable", "nope")
    assert code == 2
    assert "no endpoint 'nope'" in err


def test_resend_after_a_2xx_and_a_refusal_with_its_code(
    receiver: ScriptedReceiver, capsys: Capsys
) -> None:
    sent = _send(capsys, receiver.url)
    assert sent["state"] == "delivered"
    did = sent["delivery_id"]
    code, resent = _json(capsys, "resend", did, "--actor", "ops", "--secret", SECRET)
    assert code == 0
    [item] = resent["items"]
    assert (item["state"], item["attempts"]) == ("delivered", 2)
    first, second = receiver.received
    assert first.body == second.body
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert first.headers["webhook-signature"] != second.headers["webhook-signature"]
    assert all(r.verified for r in receiver.received)
    # queued but not sent: a second resend of it is refused, with the stable code, exit 1
    assert _run(capsys, "resend", did, "--actor", "ops", "--queue-only")[0] == 0
    code, out, _ = _run(capsys, "resend", did, "--actor", "ops", "--queue-only")
    assert code == 1
    assert "WEBHOOK_DELIVERY_NOT_REPLAYABLE" in out
    assert f"{did}: pending" in out


def test_deliveries_list_filters_and_export_with_its_cap(
    receiver: ScriptedReceiver, capsys: Capsys, tmp_path: Path
) -> None:
    receiver.statuses = [200]
    _send(capsys, receiver.url, "--business-key", "ren_1")
    receiver.statuses = [410]
    _send(capsys, receiver.url, "--business-key", "ren_2")
    code, rows = _json(capsys, "deliveries", "list", "--http-class", "4xx")
    assert [r["business_key"] for r in rows] == ["ren_2"]
    code, rows = _json(capsys, "deliveries", "list", "--status", "delivered")
    assert [r["business_key"] for r in rows] == ["ren_1"]
    code, out, _ = _run(capsys, "deliveries", "export", "--csv", "all.csv", "--kind", "delivery")
    assert code == 0
    assert "Exported 2 row(s)" in out
    with open(tmp_path / "all.csv", newline="") as handle:
        exported = list(csv.DictReader(handle))
    assert sorted(r["business_key"] for r in exported) == ["ren_1", "ren_2"]


def test_an_export_over_the_cap_is_refused_and_writes_no_file(
    capsys: Capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sender_sim.inspection as inspection

    store = SQLiteStore(DEFAULT_DB)
    from sender_sim import Simulator

    sim = Simulator(store)
    for n in range(3):
        sim.publish_event(event_type="t", deadline_at=sim.now(), data={"n": n})
    store.close()
    monkeypatch.setattr(inspection, "EXPORT_LIMIT", 2)
    code, _, err = _run(capsys, "deliveries", "export", "--csv", "big.csv")
    assert code == 2
    assert "EXPORT_TOO_LARGE" in err
    assert not (tmp_path / "big.csv").exists()
    assert list(tmp_path.glob("*.csv")) == []


def test_metrics_as_text_json_and_prometheus(receiver: ScriptedReceiver, capsys: Capsys) -> None:
    receiver.statuses = [503, 200]
    _send(capsys, receiver.url)
    code, out, _ = _run(capsys, "metrics")
    assert code == 0
    assert "next safe attempt past deadline: 0" in out
    code, out, _ = _run(capsys, "metrics", "--format", "prometheus")
    assert code == 0
    assert 'hookproof_sender_deliveries{state="delivered"} 1.0' in out
    assert "hookproof_sender_threatened_deliveries 0.0" in out
    assert "# TYPE hookproof_sender_attempts gauge" in out


def test_a_command_that_advances_the_simulated_clock_says_so(
    receiver: ScriptedReceiver, capsys: Capsys
) -> None:
    receiver.statuses = [503, 503, 503, 200]
    code, out, _ = _run(
        capsys, "send", receiver.url, "--secret", SECRET, "--policy", "schedule", "--deadline",
        "+2h",
    )  # fmt: skip
    assert code == 0
    assert "This command advanced the simulated clock by" in out
    code, out, _ = _run(capsys, "send", receiver.url, "--secret", SECRET)
    assert "Simulated time starts at" in out


SHADOW_LOG = [
    # agrees: 503 retried on the schedule (+1 m after the first attempt's due time)
    {
        "delivery_id": "d1",
        "attempt": 1,
        "scheduled_at": "2026-08-13T09:00:00Z",
        "ended_at": "2026-08-13T09:00:01Z",
        "deadline_at": "2026-08-14T09:00:00Z",
        "status": 503,
        "decision": "retry",
        "next_at": "2026-08-13T09:01:00Z",
    },
    # disagrees: they dead-lettered a 500 at once; we retry
    {
        "delivery_id": "d2",
        "attempt": 1,
        "ended_at": "2026-08-13T09:00:01Z",
        "deadline_at": "2026-08-14T09:00:00Z",
        "status": 500,
        "decision": "dead_letter",
        "reason": "permanent_response",
    },
    # disagrees: their retry is due at another time
    {
        "delivery_id": "d3",
        "attempt": 2,
        "scheduled_at": "2026-08-13T09:01:00Z",
        "ended_at": "2026-08-13T09:01:01Z",
        "deadline_at": "2026-08-14T09:00:00Z",
        "error": "timeout",
        "decision": "retry",
        "next_at": "2026-08-13T09:02:00Z",
    },
    # disagrees: a retry that cannot fit the deadline (we dead-letter it)
    {
        "delivery_id": "d4",
        "attempt": 1,
        "scheduled_at": "2026-08-13T09:00:00Z",
        "ended_at": "2026-08-13T09:00:01Z",
        "deadline_at": "2026-08-13T09:01:02Z",
        "status": 503,
        "decision": "retry",
        "next_at": "2026-08-13T09:01:00Z",
    },
]


def test_shadow_reports_every_disagreement_and_sends_nothing(
    capsys: Capsys, tmp_path: Path
) -> None:
    log = tmp_path / "attempts.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in SHADOW_LOG) + "\n")
    code, report = _json(capsys, "shadow", str(log), "--policy", "schedule")
    assert code == 1
    assert report["compared"] == 4
    assert [(d["delivery_id"], d["kind"]) for d in report["disagreements"]] == [
        ("d2", "decision"),
        ("d3", "next_at"),
        ("d4", "decision"),
    ]
    assert report["disagreements"][2]["ours"] == "dead_letter (deadline_exhausted)"
    assert not Path(DEFAULT_DB).exists()
    log.write_text("{not json}\n")
    code, _, err = _run(capsys, "shadow", str(log))
    assert code == 2
    assert "line 1" in err
