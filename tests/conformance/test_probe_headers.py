"""``--header`` reaches the probe too: a gateway in front of an endpoint usually guards its probe
as well, so the probe's reads carry the run's extra headers (its own ``Authorization`` keeps the
bearer token), and the probe's reproduction shows them, credentials redacted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from conformance.exceptions import ProbeUnusable
from conformance.probe import Probe
from conformance.session import run_check
from receiver.app import ReceiverSettings, create_app
from receiver.server import running_server
from tests.conformance.broken_receivers import PROBE_TOKEN
from tests.conformance.support import SECRET, Collector, app_settings

API_KEY = ("X-Api-Key", "gw-key-1")


class _Gateway:
    """Answers 401 to any request without the API key, as an API gateway would."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.refused = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (b"x-api-key", b"gw-key-1") not in scope["headers"]:
            self.refused += 1
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"missing API key"})
            return
        await self.app(scope, receive, send)


def _check_behind_gateway(tmp_path: Path, headers: tuple[tuple[str, str], ...]) -> Collector:
    receiver = ReceiverSettings(
        secrets=[SECRET], db=str(tmp_path / "inbox.sqlite"), probe_token=PROBE_TOKEN
    )
    collector = Collector()
    with running_server(_Gateway(create_app(receiver))) as base:
        settings = app_settings(
            PROBE_TOKEN,
            url=f"{base}/webhooks",
            probe=f"{base}/_hookproof/events",
            headers=headers,
            select=("signature.valid", "response.ack-after-commit"),
        )
        asyncio.run(run_check(settings, [collector]))
    return collector


def test_the_probe_reads_carry_the_runs_headers_through_a_gateway(tmp_path: Path) -> None:
    collector = _check_behind_gateway(tmp_path, (API_KEY,))
    assert [(r.scenario.id, r.outcome.value) for r in collector.results] == [
        ("signature.valid", "passed"),
        ("response.ack-after-commit", "passed"),
    ]


def test_without_the_header_the_gateway_refuses_the_probe_once_before_the_run(
    tmp_path: Path,
) -> None:
    with pytest.raises(ProbeUnusable, match="refused the token"):
        _check_behind_gateway(tmp_path, ())


def test_the_probes_own_authorization_wins_and_credentials_are_redacted() -> None:
    probe = Probe(
        "http://127.0.0.1:9/_hookproof/events",
        "probe-token",
        (API_KEY, ("Authorization", "Basic Z3c6cHc="), ("X-Tenant", "acme")),
    )
    assert probe.headers == {
        "X-Api-Key": "gw-key-1",
        "X-Tenant": "acme",
        "Authorization": "Bearer probe-token",
    }
    assert probe.curl("evt 1", show_secrets=False) == (
        "curl -sS -H 'X-Api-Key: <redacted>' -H 'X-Tenant: acme' "
        "-H 'Authorization: Bearer <redacted>' http://127.0.0.1:9/_hookproof/events/evt%201"
    )
    assert "gw-key-1" in probe.curl("e", show_secrets=True)
    assert "Bearer probe-token" in probe.curl("e", show_secrets=True)
