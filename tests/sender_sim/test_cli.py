"""``hookproof send``, ``dlq list``, ``dlq redrive`` and ``explain`` through the root CLI, against
real loopback endpoints: the reference receiver and scripted Starlette apps (uvicorn in a thread).
respx only scripts network errors."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from conformance.cli import main
from sender_sim import SQLiteStore
from sender_sim.commands.support import describe_row
from tests.sender_sim.test_cli_support import OTHER_SECRET, SECRET, ScriptedReceiver, scripted

pytestmark = pytest.mark.usefixtures("in_private_folder")

Capsys = pytest.CaptureFixture[str]


Script = Callable[..., contextlib.AbstractContextManager[ScriptedReceiver]]


@pytest.fixture
def script(_shared_receiver: ScriptedReceiver) -> Script:
    """``with script(503, 200) as receiver:`` — one loopback server per module, its answers
    scripted and its log cleared for each use."""

    @contextlib.contextmanager
    def use(*statuses: int) -> Iterator[ScriptedReceiver]:
        _shared_receiver.statuses = list(statuses) or [200]
        _shared_receiver.received.clear()
        yield _shared_receiver

    return use


def _run(capsys: Capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _send_json(capsys: Capsys, url: str, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, err = _run(capsys, "send", url, "--secret", SECRET, "--json", *extra)
    assert err == "", err
    return code, json.loads(out)


def _effects(base_url: str, event_id: str) -> dict[str, object]:
    base = base_url.removesuffix("/webhooks")
    response = httpx.get(
        f"{base}/_hookproof/events/{event_id}", headers={"Authorization": "Bearer probe-token"}
    )
    assert response.status_code == 200, response.text
    document = response.json()
    assert isinstance(document, dict)
    return document


# -- send --------------------------------------------------------------------------------------


def test_send_delivers_to_the_reference_receiver_once(reference: str, capsys: Capsys) -> None:
    code, out, err = _run(
        capsys,
        "send",
        reference,
        "--secret",
        SECRET,
        "--event-type",
        "renewal.reminder",
        "--business-key",
        "ren_18427",
    )
    assert code == 0, err
    assert "(new) -> scheduled" in out
    assert "scheduled -> leased" in out
    assert "leased -> delivered" in out
    assert "Result: delivered after 1 attempt(s)" in out
    assert "business key ren_18427" in out
    assert SECRET not in out
    assert SECRET.removeprefix("whsec_") not in out
    event_id = out.split("Sending event ", 1)[1].split()[0]
    assert _effects(reference, event_id)["effects"] == 1


def test_send_json_is_machine_readable(reference: str, capsys: Capsys) -> None:
    code, document = _send_json(capsys, reference, "--event-id", "evt_json_1")
    assert code == 0
    assert document["state"] == "delivered"
    assert document["event_id"] == "evt_json_1"
    assert document["attempts"] == 1
    assert document["clock"] == "virtual"
    ledger = document["ledger"]
    assert isinstance(ledger, list)
    assert [row["cause"] for row in ledger] == ["published", "leased", "delivered"]
    assert "Story:" in str(document["explanation"])


def test_always_500_dead_letters_in_well_under_a_second(script: Script, capsys: Capsys) -> None:
    with script(500) as receiver:
        started = time.monotonic()
        code, document = _send_json(
            capsys, receiver.url, "--policy", "schedule", "--deadline", "+48h"
        )
        elapsed = time.monotonic() - started
    assert code == 1
    assert document["state"] == "dead_letter"
    assert document["reason"] == "attempts_exhausted"
    assert document["attempts"] == 10
    assert len(receiver.received) == 10
    assert elapsed < 1.0, f"ten attempts over 31 virtual hours took {elapsed:.2f}s of wall time"
    # every attempt carried the same body and event id, each signed afresh and valid
    assert len({r.body for r in receiver.received}) == 1
    assert len({r.headers["webhook-id"] for r in receiver.received}) == 1
    assert all(r.verified for r in receiver.received)


def test_503_then_200_retries_then_delivers(script: Script, capsys: Capsys) -> None:
    with script(503, 200) as receiver:
        code, out, _ = _run(capsys, "send", receiver.url, "--secret", SECRET)
    assert code == 0
    assert "answered HTTP 503, classified server_error; retry scheduled" in out
    assert "Result: delivered after 2 attempt(s)" in out


def test_410_dead_letters_as_permanent(script: Script, capsys: Capsys) -> None:
    with script(410) as receiver:
        code, out, _ = _run(capsys, "send", receiver.url, "--secret", SECRET)
    assert code == 1
    assert "Result: dead letter (permanent_response) after 1 attempt(s)" in out


def test_a_deadline_too_close_dead_letters_before_any_send(script: Script, capsys: Capsys) -> None:
    with script(200) as receiver:
        code, document = _send_json(capsys, receiver.url, "--deadline", "+10s")
    assert code == 1
    assert document["reason"] == "deadline_exhausted"
    assert receiver.received == []


def test_secret_from_the_environment_and_rotation(
    script: Script, capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKPROOF_SECRET", f"{OTHER_SECRET} {SECRET}")
    with script(200) as receiver:
        code, _out, err = _run(capsys, "send", receiver.url)
    assert code == 0, err
    signature = receiver.received[0].headers["webhook-signature"]
    assert len(signature.split()) == 2
    assert receiver.received[0].verified


def test_real_time_stamps_the_wire_with_now(script: Script, capsys: Capsys) -> None:
    with script(200) as receiver:
        code, document = _send_json(capsys, receiver.url, "--real-time")
    assert code == 0
    assert document["clock"] == "real"
    assert abs(int(receiver.received[0].headers["webhook-timestamp"]) - time.time()) < 60


@pytest.mark.parametrize("scheme", ["stripe", "github"])
def test_other_schemes(scheme: str, capsys: Capsys) -> None:
    with scripted(200, scheme=scheme) as receiver:
        code, _ = _send_json(capsys, receiver.url, "--scheme", scheme)
    headers = receiver.received[0].headers
    assert code == 0
    assert receiver.received[0].verified
    assert ("stripe-signature" in headers) == (scheme == "stripe")
    assert ("x-hub-signature-256" in headers) == (scheme == "github")


def test_event_file_as_data_and_as_a_whole_body(
    script: Script, tmp_path: Path, capsys: Capsys
) -> None:
    data_file = tmp_path / "data.json"
    data_file.write_text('{"renewal_id": "ren_7"}')
    body_file = tmp_path / "body.json"
    raw = b'{ "type" : "invoice.paid",\n  "data": {"amount": 1.50, "note": "caf\\u00e9"} }\n'
    body_file.write_bytes(raw)
    with script(200) as receiver:
        assert _send_json(capsys, receiver.url, "--event", str(data_file))[0] == 0
        code, document = _send_json(capsys, receiver.url, "--event", str(body_file))
    first = json.loads(receiver.received[0].body)
    assert first["data"] == {"renewal_id": "ren_7"}
    assert first["type"] == "hookproof.test"
    assert receiver.received[1].body == raw  # byte for byte, whitespace and escapes kept
    assert code == 0
    assert document["state"] == "delivered"


def test_crash_after_send_resends_and_the_receiver_applies_once(
    reference: str, capsys: Capsys
) -> None:
    code, document = _send_json(
        capsys, reference, "--fault", "crash_after_send:attempts=1", "--event-id", "evt_crash"
    )
    assert code == 0
    causes = [row["cause"] for row in document["ledger"]]
    assert "fault:crash_after_send" in causes
    assert "lease_taken_over" in causes
    assert document["attempts"] == 2
    probe = _effects(reference, "evt_crash")
    assert probe["effects"] == 1
    assert probe["deliveries"] == 2


def test_scripted_network_errors_are_retried(capsys: Capsys) -> None:
    url = "http://127.0.0.1:9/webhooks"
    with respx.mock(assert_all_called=True) as mock:
        mock.post(url).side_effect = [
            httpx.ConnectError("connection refused"),
            httpx.ReadTimeout("timed out"),
            httpx.Response(200),
        ]
        code, document = _send_json(capsys, url, "--seed", "3")
    assert code == 0
    assert document["attempts"] == 3
    text = str(document["explanation"])
    assert "ended with connect" in text
    assert "ended with timeout" in text


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["send", "not a url", "--secret", SECRET], "URL"),
        (["send", "ftp://127.0.0.1/x", "--secret", SECRET], "http:// or https://"),
        (["send", "http://127.0.0.1:99999/x", "--secret", SECRET], "port 99999 does not exist"),
        (["send", "http://[::1/x", "--secret", SECRET], "URL"),
        (["send", "http://127.0.0.1:9/x"], "--secret"),
        (["send", "http://127.0.0.1:9/x", "--secret", "whsec_!!!"], "base64"),
        (["send", "http://127.0.0.1:9/x", "--secret", SECRET, "--deadline", "soon"], "deadline"),
        (
            ["send", "http://127.0.0.1:9/x", "--secret", SECRET, "--deadline", "2026-08-13T10:00"],
            "timezone",
        ),
        (["send", "http://127.0.0.1:9/x", "--secret", SECRET, "--db", "/no/such/dir/x.db"], "db"),
        (["send", "http://127.0.0.1:9/x", "--secret", SECRET, "--event", "missing.json"], "read"),
        (["send", "http://127.0.0.1:9/x", "--secret", SECRET, "--event", "bad.json"], "JSON"),
        (["send", "http://127.0.0.1:9/x", "--secret", SECRET, "--event", "list.json"], "object"),
        (["send", "http://127.0.0.1:9/x", "--secret", SECRET, "--fault", "gremlins"], "fault"),
        (["send", "http://127.0.0.1:9/x", "--secret", SECRET, "--policy", "lax"], "--policy"),
        (["send", "http://127.0.0.1:9/x", "--secret", SECRET, "--timeout", "0"], "--timeout"),
        (["dlq", "list"], "no sender database"),
        (["explain", "del_nope"], "no sender database"),
        (["dlq", "redrive", "--actor", "a", "--reason", "r", "--deadline", "+1h"], "scope"),
        (
            ["dlq", "redrive", "--actor", "a", "--reason", "r", "--deadline", "+1h", "--ids", "x"],
            "--secret",
        ),
        (["dlq", "redrive", "--reason", "r", "--deadline", "+1h", "--ids", "x"], "--actor"),
        (["dlq", "list", "--reason", "bored"], "--reason"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    argv: list[str], expected: str, tmp_path: Path, capsys: Capsys
) -> None:
    (tmp_path / "bad.json").write_text('{"a": ')
    (tmp_path / "list.json").write_text("[1, 2]")
    code, out, err = _run(capsys, *argv)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("hookproof: error:")
    assert expected.lower() in lines[0].lower()
    assert "Traceback" not in err
    assert "!!!" not in err


def test_explain_of_an_unknown_id_is_one_line_and_exit_2(script: Script, capsys: Capsys) -> None:
    with script(200) as receiver:
        assert _send_json(capsys, receiver.url)[0] == 0
    code, out, err = _run(capsys, "explain", "del_unknown")
    assert code == 2
    assert out == ""
    assert err.strip() == "hookproof: error: no delivery 'del_unknown'"


# -- dlq ---------------------------------------------------------------------------------------


def _dead_letters(capsys: Capsys, url: str) -> tuple[str, str]:
    """One permanent_response (ren_1) and one deadline_exhausted (ren_2) dead letter."""
    _, gone = _send_json(capsys, url, "--business-key", "ren_1")
    _, late = _send_json(capsys, url, "--business-key", "ren_2", "--deadline", "+10s")
    return str(gone["delivery_id"]), str(late["delivery_id"])


def test_dlq_list_table_json_and_filters(script: Script, capsys: Capsys) -> None:
    with script(410) as receiver:
        gone, late = _dead_letters(capsys, receiver.url)
    code, out, _ = _run(capsys, "dlq", "list")
    assert code == 0
    header, *rows, footer = out.strip().splitlines()
    assert header.split() == [
        "DELIVERY",
        "BUSINESS",
        "KEY",
        "REASON",
        "ATTEMPTS",
        "DEADLINE",
        "LAST",
        "OUTCOME",
    ]
    assert footer == "2 dead letter(s)"
    assert rows[0].split()[:4] == [gone, "ren_1", "permanent_response", "1/8"]
    assert rows[0].endswith("HTTP 410 gone")
    assert rows[1].split()[:4] == [late, "ren_2", "deadline_exhausted", "0/8"]
    assert rows[1].endswith("(no attempt)")

    code, out, _ = _run(capsys, "dlq", "list", "--reason", "deadline_exhausted", "--json")
    assert [d["delivery_id"] for d in json.loads(out)] == [late]
    code, out, _ = _run(capsys, "dlq", "list", "--business-key", "ren_1", "--json")
    assert [d["delivery_id"] for d in json.loads(out)] == [gone]
    code, out, _ = _run(capsys, "dlq", "list", "--endpoint", receiver.url, "--limit", "1")
    assert gone in out
    assert late not in out
    code, out, _ = _run(capsys, "dlq", "list", "--endpoint", "elsewhere")
    assert out.strip() == "No dead letters match."


def test_redrive_runs_the_delivery_and_a_second_run_is_refused(
    script: Script, capsys: Capsys
) -> None:
    with script(410, 200) as receiver:
        gone, _ = _dead_letters(capsys, receiver.url)
        argv = [
            "dlq",
            "redrive",
            "--actor",
            "ops@example.com",
            "--reason",
            "receiver fixed",
            "--deadline",
            "+1h",
            "--ids",
            gone,
            "--secret",
            SECRET,
        ]
        code, out, err = _run(capsys, *argv)
        assert code == 0, err
        assert out.startswith("Redrive decision 1 by ops@example.com: queued 1 delivery(ies)")
        assert "leased -> delivered" in out
        assert f"  {gone}  delivered after 2 attempt(s)" in out
        assert len(receiver.received) == 2
        assert receiver.received[0].body == receiver.received[1].body
        again_code, again, _ = _run(capsys, *argv)
    assert again_code == 1
    assert "Redrive decision 2 by ops@example.com: REFUSED; nothing was queued" in again
    assert f"{gone}: is delivered, not a dead letter (already redriven 1x) [not_dead_letter]" in (
        again
    )
    assert len(receiver.received) == 2


def test_redrive_queue_only_then_double_run_refused(script: Script, capsys: Capsys) -> None:
    with script(410) as receiver:
        _, late = _dead_letters(capsys, receiver.url)
    argv = [
        "dlq",
        "redrive",
        "--actor",
        "a@x",
        "--reason",
        "extend",
        "--deadline",
        "+2h",
        "--dlq-reason",
        "deadline_exhausted",
        "--queue-only",
        "--json",
    ]
    code, out, _ = _run(capsys, *argv)
    assert code == 0
    first = json.loads(out)
    assert first["result"] == "queued"
    assert [item["state"] for item in first["items"]] == ["scheduled"]
    assert first["sent"] is False
    code, out, _ = _run(capsys, *argv)
    assert code == 1
    second = json.loads(out)
    assert second["result"] == "refused"
    assert {p["code"] for p in second["problems"]} == {"not_dead_letter"}
    assert second["problems"][0]["delivery_id"] == late


def test_redrive_refusals(script: Script, capsys: Capsys) -> None:
    with script(410) as receiver:
        gone, _ = _dead_letters(capsys, receiver.url)
    code, out, _ = _run(
        capsys,
        "dlq",
        "redrive",
        "--actor",
        "a",
        "--reason",
        "r",
        "--deadline",
        "+5s",
        "--ids",
        f"{gone},del_missing",
        "--queue-only",
    )
    assert code == 1
    assert "REFUSED" in out
    assert "del_missing: no such delivery" in out
    assert "[not_found]" in out
    assert f"{gone}: an attempt started now would not fit the new deadline" in out
    code, out, _ = _run(capsys, "dlq", "list", "--json")
    assert len(json.loads(out)) == 2  # nothing was queued: bulk is all-or-nothing


# -- explain -----------------------------------------------------------------------------------


def test_explain_tells_every_transition(script: Script, capsys: Capsys) -> None:
    with script(503, 410, 200) as receiver:
        code, document = _send_json(
            capsys,
            receiver.url,
            "--fault",
            "lease_expiry_in_flight:attempts=1",
            "--business-key",
            "ren_18427",
        )
        assert code == 1
        delivery_id = str(document["delivery_id"])
        redrive = [
            "dlq",
            "redrive",
            "--actor",
            "ops@example.com",
            "--reason",
            "owner extended",
            "--deadline",
            "+1h",
            "--ids",
            delivery_id,
            "--secret",
            SECRET,
        ]
        assert _run(capsys, *redrive)[0] == 0
        assert _run(capsys, *redrive)[0] == 1
    code, out, err = _run(capsys, "explain", delivery_id)
    assert code == 0, err
    store = SQLiteStore("hookproof-sender.sqlite")
    try:
        ledger = store.ledger(delivery_id)
        attempts = store.attempts(delivery_id)
    finally:
        store.close()
    causes = [row.cause for row in ledger]
    for expected in (
        "published",
        "leased",
        "fault:lease_expiry_in_flight",
        "lease_expired_in_flight",
        "lease_taken_over",
        "terminal_outcome",
        "stale_ack_refused",
        "redriven",
        "delivered",
        "redrive_refused",
    ):
        assert expected in causes
    for row in ledger:
        assert describe_row(row) in out, row.cause
    assert len(attempts) == 3
    for attempt in attempts:
        assert f"#{attempt.number}  " in out
    assert "NOT acked" in out  # the stale worker's attempt
    assert "Redrive decisions:" in out
    assert "left at" in out
    assert "each attempt budgeted 30s" in out

    code, out, _ = _run(capsys, "explain", delivery_id, "--json")
    document = json.loads(out)
    assert [row["cause"] for row in document["ledger"]] == causes
    assert document["state"] == "delivered"


def test_bare_dlq_shows_its_help(capsys: Capsys) -> None:
    code, out, err = _run(capsys, "dlq")
    assert code == 0
    assert err == ""
    assert "list" in out
    assert "redrive" in out
