"""``hookproof sandbox`` through the root CLI: commands fed on stdin against the reference
receiver on a real loopback port, the dashboard started and stopped, one-line option errors."""

from __future__ import annotations

import asyncio
import io
import json
import socket
from collections.abc import AsyncIterator

import httpx
import pytest

from conformance.cli import main
from sender_sim.sandbox.cli import PROMPT, prompted, stream_lines
from tests.sender_sim.test_cli_support import SECRET

pytestmark = pytest.mark.usefixtures("in_private_folder")

Capsys = pytest.CaptureFixture[str]


def _sandbox(
    monkeypatch: pytest.MonkeyPatch, capsys: Capsys, stdin: str, *argv: str
) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(["sandbox", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_session_fed_on_stdin(
    reference: str, monkeypatch: pytest.MonkeyPatch, capsys: Capsys
) -> None:
    script = "\n".join(
        [
            "publish renewal.reminder renewal_id=ren_18427",
            "publish hookproof.demo.gone",
            "fault on crash_after_send:attempts=1",
            "publish renewal.reminder renewal_id=ren_2",
            "fault off crash_after_send",
            "list",
            "dlq",
            "nonsense",
            "",
        ]
    )  # no quit: the end of input ends the session
    code, out, err = _sandbox(
        monkeypatch,
        capsys,
        script,
        "--forward-to",
        reference,
        "--secret",
        SECRET,
        "--no-dashboard",
    )
    assert code == 0, err
    assert out.startswith(f"hookproof sandbox: forwarding to {reference} (scheme standard")
    assert "dashboard:" not in out
    assert "business key ren_18427" in out
    assert out.count("leased -> delivered") == 2
    assert "answered HTTP 410, classified gone -> dead letter (permanent_response)" in out
    assert "FAULT injected: crash_after_send on attempt 1 (the receiver's answer was 200)" in out
    assert "took the delivery over" in out
    assert "  permanent_response: 1 (ren_g2: 1)" in out
    assert "error: unknown command 'nonsense'; type help" in out
    assert out.rstrip().endswith("sandbox closed")
    assert SECRET not in out
    assert err == ""
    # the state is in the shared database: the other commands see it
    assert main(["dlq", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [d["business_key"] for d in listed] == ["ren_g2"]
    event_id = next(
        line.split()[2] for line in out.splitlines() if "ren_2," in line and "published" in line
    )
    probe = httpx.get(
        reference.removesuffix("/webhooks") + f"/_hookproof/events/{event_id}",
        headers={"Authorization": "Bearer probe-token"},
    ).json()
    assert probe["effects"] == 1  # the crash made two deliveries, the receiver applied it once
    assert probe["deliveries"] == 2


def test_redrive_from_the_sandbox_and_explain_later(
    reference: str, monkeypatch: pytest.MonkeyPatch, capsys: Capsys
) -> None:
    code, out, _ = _sandbox(
        monkeypatch,
        capsys,
        "publish hookproof.demo.gone\nquit\n",
        "--forward-to",
        reference,
        "--secret",
        SECRET,
        "--no-dashboard",
    )
    assert code == 0
    delivery_id = next(w for w in out.split() if w.startswith("del_")).rstrip(",")
    script = (
        f"redrive {delivery_id[:12]} --actor ops@example.com --reason 'try once more' "
        "--deadline +1h\nquit\n"
    )
    code, out, _ = _sandbox(
        monkeypatch,
        capsys,
        script,
        "--forward-to",
        reference,
        "--secret",
        SECRET,
        "--no-dashboard",
    )
    assert code == 0
    assert "redrive decision 1 by ops@example.com: queued" in out
    assert "dead_letter -> scheduled" in out
    assert "answered HTTP 410" in out  # the receiver still says gone: back to the DLQ
    assert main(["explain", delivery_id]) == 0
    story = capsys.readouterr().out
    assert 'REDRIVE by ops@example.com (decision 1), reason: "try once more"' in story


def test_the_dashboard_starts_and_stops_with_the_session(
    reference: str, monkeypatch: pytest.MonkeyPatch, capsys: Capsys
) -> None:
    code, out, err = _sandbox(
        monkeypatch,
        capsys,
        "help\n",
        "--forward-to",
        reference,
        "--secret",
        SECRET,
        "--fault",
        "lost_response:attempts=1",
        "--policy",
        "schedule",
        "--real-time",
    )
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("dashboard: "))
    assert line.startswith("dashboard: http://127.0.0.1:")
    assert "faults on: lost_response" in out
    assert "policy schedule, real time" in out
    port = int(line.rsplit(":", 1)[1].strip("/"))
    with socket.socket() as probe:  # the port was released when the session ended
        probe.bind(("127.0.0.1", port))


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], "--forward-to"),
        (["--forward-to", "http://127.0.0.1:9/x"], "--secret"),
        (["--forward-to", "nowhere", "--secret", SECRET], "--forward-to"),
        (["--forward-to", "http://127.0.0.1:9/x", "--secret", "whsec_!!!"], "base64"),
        (
            ["--forward-to", "http://127.0.0.1:9/x", "--secret", SECRET, "--deadline", "0s"],
            "positive",
        ),
        (
            ["--forward-to", "http://127.0.0.1:9/x", "--secret", SECRET, "--deadline", "x"],
            "duration",
        ),
        (
            ["--forward-to", "http://127.0.0.1:9/x", "--secret", SECRET, "--template", "no.json"],
            "cannot read",
        ),
        (
            ["--forward-to", "http://127.0.0.1:9/x", "--secret", SECRET, "--fault", "gremlins"],
            "unknown fault",
        ),
        (
            ["--forward-to", "http://127.0.0.1:9/x", "--secret", SECRET, "--db", "/no/such/x.db"],
            "does not exist",
        ),
        (
            [
                "--forward-to",
                "http://127.0.0.1:9/x",
                "--secret",
                SECRET,
                "--dashboard-port",
                "70000",
            ],
            "--dashboard-port",
        ),
    ],
)
def test_bad_options_are_one_line_and_exit_2(
    argv: list[str], expected: str, monkeypatch: pytest.MonkeyPatch, capsys: Capsys
) -> None:
    code, out, err = _sandbox(monkeypatch, capsys, "", *argv)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("hookproof: error:")
    assert expected in lines[0]
    assert "!!!" not in err


def test_a_dashboard_port_in_use_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: Capsys
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = _sandbox(
            monkeypatch,
            capsys,
            "",
            "--forward-to",
            "http://127.0.0.1:9/x",
            "--secret",
            SECRET,
            "--dashboard-port",
            str(port),
        )
    assert code == 2
    assert err.strip().startswith("hookproof: error: cannot listen on 127.0.0.1:")


def test_an_interactive_terminal_gets_a_prompt() -> None:
    async def lines() -> AsyncIterator[str]:
        for line in ("help", "quit"):
            yield line

    async def collect() -> list[str]:
        written: list[str] = []
        seen = [line async for line in prompted(lines(), written.append)]
        assert seen == ["help", "quit"]
        return written

    assert asyncio.run(collect()) == [PROMPT, PROMPT, PROMPT]


def test_stream_lines_reads_a_blocking_stream_to_its_end() -> None:
    async def collect() -> list[str]:
        return [line async for line in stream_lines(io.StringIO("a\nb\n"))]

    assert asyncio.run(collect()) == ["a\n", "b\n"]
