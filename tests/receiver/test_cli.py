"""``hookproof receiver``: bad input is one line and exit 2; a real process serves requests."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from conformance.cli import cli
from receiver.app import ReceiverSettings, create_app
from receiver.server import base_url, running_server
from receiver.signing import Secret, Verifier
from sender_sim.urls import url_problem
from tests.support.cli import usage_error_line
from tests.support.processes import LOOPBACK, ServerProcess, free_port, hookproof_argv

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
ROTATED = "whsec_c2VjcmV0LW9mLWFub3RoZXItc2VuZGVyIQ=="


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ([], "at least one --secret"),
        (["--secret", "whsec_!!!not-base64"], "base64"),
        (["--secret", SECRET, "--scheme", "sha1"], "--scheme"),
        (["--secret", SECRET, "--tolerance", "-1"], "--tolerance"),
        (["--secret", SECRET, "--port", "70000"], "--port"),
        (["--secret", SECRET, "--max-body", "0"], "--max-body"),
        (["--secret", SECRET, "--path", "webhooks", "--db", ":memory:"], "must start with '/'"),
        (["--secret", SECRET, "--bogus"], "--bogus"),
        (["--secret", SECRET, "--db", "/nonexistent-dir/x/inbox.sqlite"], "inbox"),
        (
            ["--secret", SECRET, "--db", "postgresql://user:hunter2@127.0.0.1:1/none"],
            "PostgreSQL",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    arguments: list[str], expected: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    line = usage_error_line(["receiver", *arguments], capsys)
    assert expected.lower() in line.lower()
    assert "hunter2" not in line
    assert "!!!not-base64" not in line


def test_a_port_in_use_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = usage_error_line(
            ["receiver", "--secret", SECRET, "--db", ":memory:", "--port", str(port)], capsys
        )
    assert "cannot listen" in line


def test_help_names_every_option() -> None:
    result = CliRunner().invoke(cli, ["receiver", "--help"])
    assert result.exit_code == 0
    for option in (
        "--host",
        "--port",
        "--secret",
        "--db",
        "--path",
        "--probe-token",
        "--probe-prefix",
        "--tolerance",
        "--scheme",
        "--max-body",
        "--lease",
        "--transactional",
    ):
        assert option in result.output


@pytest.mark.subprocess
def test_a_real_receiver_process_serves_signed_requests(tmp_path: Path) -> None:
    port = free_port()
    argv = hookproof_argv(
        "receiver",
        "--port",
        str(port),
        "--db",
        str(tmp_path / "inbox.sqlite"),
        "--probe-token",
        "t",
    )
    with ServerProcess.start(
        argv,
        env={"HOOKPROOF_SECRET": f"{SECRET} {ROTATED}"},
        ready_url=f"http://{LOOPBACK}:{port}/healthz",
    ) as process:
        body = json.dumps({"type": "renewal.reminder_due", "data": {"renewal_id": "r1"}}).encode()
        # Signed with the second (rotated) secret only: both configured secrets are active.
        headers = Verifier([Secret(ROTATED)]).sign(
            body, event_id="evt_cli", timestamp=int(time.time())
        )
        url = f"{process.base_url}/webhooks"
        first = httpx.post(url, content=body, headers=headers)
        again = httpx.post(url, content=body, headers=headers)
        probe = httpx.get(
            f"{process.base_url}/_hookproof/events/evt_cli", headers={"authorization": "Bearer t"}
        )
        assert first.status_code == 200, process.output()
        assert again.json() == {"event_id": "evt_cli", "duplicate": True, "status": 200}
        assert probe.json()["effects"] == 1
        # uvicorn shuts down gracefully, then re-raises SIGTERM: -15 is a clean stop.
        assert process.stop() in (0, -15)
        output = process.output()
    assert "Application shutdown complete" in output
    assert f"listening on http://{LOOPBACK}:{port}/webhooks" in output
    assert SECRET not in output
    assert ROTATED not in output


def test_every_option_is_documented() -> None:
    from receiver.commands.receiver import receiver_command

    docs = (Path(__file__).resolve().parents[2] / "docs" / "receiver.md").read_text()
    for parameter in receiver_command.params:
        for flag in parameter.opts:
            assert f"`{flag}" in docs, f"{flag} is not in docs/receiver.md"


@pytest.mark.postgres
@pytest.mark.subprocess
def test_a_real_receiver_process_on_postgresql(postgres_dsn: str) -> None:
    import uuid

    import psycopg

    schema = f"hp_cli_{uuid.uuid4().hex[:10]}"
    separator = "&" if "?" in postgres_dsn else "?"
    port = free_port()
    argv = hookproof_argv(
        "receiver",
        "--port",
        str(port),
        "--secret",
        SECRET,
        "--db",
        f"{postgres_dsn}{separator}schema={schema}&password=hunter2-pw",  # trust: not asked
        "--probe-token",
        "t",
    )
    try:
        with ServerProcess.start(argv, ready_url=f"http://{LOOPBACK}:{port}/healthz") as process:
            body = b'{"type": "renewal.reminder_due", "data": {"renewal_id": "r9"}}'
            signer = Verifier([Secret(SECRET)])
            headers = signer.sign(body, event_id="evt_pg_cli", timestamp=int(time.time()))
            for _ in range(2):
                response = httpx.post(f"{process.base_url}/webhooks", content=body, headers=headers)
                assert response.status_code == 200, process.output()
            probe = httpx.get(
                f"{process.base_url}/_hookproof/events/evt_pg_cli",
                headers={"authorization": "Bearer t"},
            )
            assert probe.json() == {
                "event_id": "evt_pg_cli",
                "status": "committed",
                "effects": 1,
                "deliveries": 2,
            }
            assert "password=<redacted>" in process.output()  # the inbox line: the DSN shown
            assert "hunter2-pw" not in process.output()
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8000"),
        ("::1", "http://[::1]:8000"),
        ("[::1]", "http://[::1]:8000"),
        ("localhost", "http://localhost:8000"),
    ],
)
def test_a_listening_url_writes_an_ipv6_host_in_brackets(host: str, url: str) -> None:
    assert base_url(host, 8000) == url
    assert url_problem(url + "/webhooks") is None  # what a user copies into hookproof check


def test_a_server_on_ipv6_loopback_is_reached_at_the_url_it_gives() -> None:
    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    except OSError:
        pytest.skip("this machine has no IPv6 loopback")
    app = create_app(ReceiverSettings(secrets=[SECRET], db=":memory:"))
    with running_server(app, host="::1") as base:
        assert base.startswith("http://[::1]:")
        assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200
