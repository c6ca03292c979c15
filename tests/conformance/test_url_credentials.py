"""A password or a token in the target's URL is used, never shown: not in the console, the
reports, a reproduction or an echoed answer (unless --show-secrets), and replay asks for the URL
again rather than sending to the redacted one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from conformance.cli import main
from receiver.redaction import REDACTED
from receiver.server import running_server
from tests.conformance.support import SECRET

PASSWORD = "pa55-w0rd-long"
TOKEN = "tok-9f8e7d6c5b"


async def _echo_and_refuse(request: Request) -> PlainTextResponse:
    """Refuses everything, echoing the query it was called with (as error pages do)."""
    return PlainTextResponse(f"no: {request.url.query}", status_code=400)


@pytest.fixture(scope="module")
def echoing() -> Iterator[str]:
    app = Starlette(routes=[Route("/webhooks", _echo_and_refuse, methods=["GET", "POST"])])
    with running_server(app) as base:
        yield base


def test_no_credential_of_the_url_reaches_the_console_or_the_reports(
    echoing: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = echoing.removeprefix("http://")
    url = f"http://alice:{PASSWORD}@{host}/webhooks?token={TOKEN}"
    files = [tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "r.ndjson"]
    code = main(
        [
            *["check", url, "--secret", SECRET, "--verbose", "--select", "signature"],
            *["--json", str(files[0]), "--junit", str(files[1]), "--ndjson", str(files[2])],
        ]
    )
    captured = capsys.readouterr()
    assert code == 1
    shown = captured.out + captured.err + "".join(f.read_text() for f in files)
    assert PASSWORD not in shown
    assert TOKEN not in shown
    assert f"alice:{REDACTED}@" in captured.out
    assert json.loads(files[0].read_text())["target"].endswith(f"webhooks?token={REDACTED}")
    assert f"no: token={REDACTED}" in captured.out  # the echo is scrubbed too


def test_show_secrets_shows_them_in_reproductions(
    echoing: str, capsys: pytest.CaptureFixture[str]
) -> None:
    host = echoing.removeprefix("http://")
    url = f"http://alice:{PASSWORD}@{host}/webhooks?token={TOKEN}"
    main(["check", url, "--secret", SECRET, "--select", "signature.valid", "--show-secrets"])
    out = capsys.readouterr().out
    assert f"curl -sS -i -X POST 'http://alice:{PASSWORD}@{host}/webhooks?token={TOKEN}'" in out


def test_replay_asks_for_a_redacted_url_again(
    echoing: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = echoing.removeprefix("http://")
    url = f"http://{host}/webhooks?token={TOKEN}"
    report = tmp_path / "r.json"
    main(["check", url, "--secret", SECRET, "--select", "signature.valid", "--json", str(report)])
    capsys.readouterr()
    assert main(["replay", str(report), "--secret", SECRET]) == 2
    err = capsys.readouterr().err
    assert "pass the URL again with --url" in err
    assert TOKEN not in err
    assert main(["replay", str(report), "--secret", SECRET, "--url", url]) == 1
    out = capsys.readouterr().out
    assert "STILL FAILING  signature.valid" in out
    assert TOKEN not in out
