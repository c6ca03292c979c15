"""An endpoint URL's password and token values are sent, never shown: not by ``endpoints``
(add, list, history), ``send``, ``explain``, ``deliveries export``, ``metrics``, nor in a sample
of what the endpoint answered; a change of them alone is still in the setup history."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from conformance.cli import main
from receiver.redaction import REDACTED, shown_url
from receiver.server import running_server
from tests.sender_sim.test_cli_support import SECRET

Capsys = pytest.CaptureFixture[str]

PASSWORD = "pa55-w0rd-long"
TOKEN = "tok-9f8e7d6c5b"


class Echoing:
    """Refuses every delivery with 400, echoing the query it was called with (as error pages
    do), and keeps what it was sent."""

    def __init__(self) -> None:
        self.authorizations: list[str] = []
        self.queries: list[str] = []

    async def answer(self, request: Request) -> PlainTextResponse:
        self.authorizations.append(request.headers.get("authorization", ""))
        self.queries.append(request.url.query)
        return PlainTextResponse(f"refused: {request.url.query}", status_code=400)


@pytest.fixture
def echoing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Echoing]]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HOOKPROOF_SECRET", raising=False)
    endpoint = Echoing()
    app = Starlette(routes=[Route("/hooks", endpoint.answer, methods=["POST"])])
    with running_server(app) as base:
        host = base.removeprefix("http://")
        yield f"http://alice:{PASSWORD}@{host}/hooks?token={TOKEN}", endpoint


def _run(capsys: Capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_sent_delivery_shows_no_credential_anywhere(
    echoing: tuple[str, Echoing], capsys: Capsys, tmp_path: Path
) -> None:
    url, endpoint = echoing
    shown: list[str] = []
    code, out = _run(capsys, "send", url, "--secret", SECRET, "--json")
    assert code == 1  # 400 under the strict policy: dead-lettered at once
    shown.append(out)
    # The endpoint was sent both credentials, as given ...
    assert endpoint.queries == [f"token={TOKEN}"]
    assert base64.b64decode(endpoint.authorizations[0].split()[1]).decode() == f"alice:{PASSWORD}"
    document = json.loads(out)
    # ... and its answer, which echoed the token, is kept without it.
    assert document["url"] == shown_url(url)
    assert document["endpoint_id"] == shown_url(url)  # the default id: the URL as shown
    code, out = _run(capsys, "send", url, "--secret", SECRET)
    assert code == 1
    assert f"to {shown_url(url)} (" in out
    shown.append(out)
    for argv in (
        ("explain", document["delivery_id"]),
        ("endpoints", "list"),
        ("endpoints", "list", "--json"),
        ("endpoints", "history"),
        ("endpoints", "history", "--json"),
        ("deliveries", "list"),
        ("deliveries", "export", "--csv", "out.csv"),
        ("metrics", "--format", "prometheus"),
        ("dlq", "list"),
    ):
        code, out = _run(capsys, *argv)
        assert code == 0, (argv, out)
        shown.append(out)
    shown.append((tmp_path / "out.csv").read_text())
    everything = "\n".join(shown)
    assert "refused: token=" in everything  # the echoed answer is there, scrubbed
    assert PASSWORD not in everything
    assert TOKEN not in everything
    assert REDACTED in everything


def test_a_change_of_the_urls_credentials_alone_is_in_the_setup_history(
    echoing: tuple[str, Echoing], capsys: Capsys
) -> None:
    url, _ = echoing
    rotated = url.replace(PASSWORD, "n3w-pa55word")
    for given in (url, url, rotated):
        code, out = _run(capsys, "endpoints", "add", "shop", given, "--secret", SECRET)
        assert code == 0, out
        assert f"-> {shown_url(given)} (" in out
    code, out = _run(capsys, "endpoints", "history", "shop", "--json")
    history = json.loads(out)
    assert [entry["action"] for entry in history] == ["created", "changed"]
    assert history[1]["after"]["url_credentials"] == "changed"
    assert history[1]["before"]["url"] == history[1]["after"]["url"] == shown_url(url)
    assert PASSWORD not in out
    assert "n3w-pa55word" not in out
