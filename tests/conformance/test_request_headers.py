"""The headers every webhook carries besides the signed ones: the platform's own (the scheme's
delivery headers: GitHub's X-GitHub-Event, Stripe's content type) and the partner's
``--header``s (a gateway's API key), on the runner's requests and the sender simulator's alike,
redacted where they look like credentials; and the GitHub delivery id outside the signature,
whose malformed shapes are judged apart (``signature.malformed-unsigned-id``)."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from conformance.cli import main
from conformance.commands.replay import plan_replay
from conformance.config import CheckSettings, load_config
from conformance.exceptions import ConfigError, UsageError
from conformance.model import Severity
from conformance.results import Outcome
from conformance.session import wire_options
from receiver.app import ReceiverSettings, create_app
from receiver.signing import Secret
from sender_sim.wire import signed_headers
from tests.conformance.support import SECRET, app_settings, run_in_process

GITHUB_SECRET = "github-zoo-secret"

Handler = Callable[[Request], Awaitable[Response]]


def _recording(handler: Handler) -> tuple[Starlette, list[dict[str, str]]]:
    """``handler`` on POST /webhooks, keeping every request's headers."""
    seen: list[dict[str, str]] = []

    async def endpoint(request: Request) -> Response:
        seen.append({k.lower(): v for k, v in request.headers.items()})
        return await handler(request)

    return Starlette(routes=[Route("/webhooks", endpoint, methods=["POST"])]), seen


async def _accept(request: Request) -> Response:
    await request.body()
    return JSONResponse({"ok": True})


@pytest.mark.parametrize(
    ("scheme", "secret", "expected"),
    [
        ("standard", SECRET, {"content-type": "application/json"}),
        (
            "stripe",
            "whsec_stripe_style",
            {
                "content-type": "application/json; charset=utf-8",
                "user-agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
            },
        ),
        (
            "github",
            GITHUB_SECRET,
            {
                "content-type": "application/json",
                "x-github-event": "ping",
                "user-agent": "GitHub-Hookshot/hookproof",
            },
        ),
    ],
)
def test_every_delivery_carries_the_platforms_own_headers(
    scheme: str, secret: str, expected: dict[str, str]
) -> None:
    """The runner's deliveries and the sender simulator's (sequential-duplicate is sent by the
    simulator) carry what the platform sends; Octokit, say, refuses a delivery without
    X-GitHub-Event."""
    app, seen = _recording(_accept)
    settings = app_settings(
        None,
        scheme=scheme,
        secrets=(secret,),
        select=("signature.valid", "idempotency.sequential-duplicate"),
    )
    results = run_in_process(app, settings)
    assert {r.outcome for r in results.values()} == {Outcome.PASSED}
    assert len(seen) >= 3
    for headers in seen:
        assert {name: headers.get(name) for name in expected} == expected


def test_the_sender_simulator_signs_with_the_platforms_headers() -> None:
    headers = signed_headers(
        scheme="github",
        secrets=[Secret(GITHUB_SECRET)],
        event_id="evt_1",
        body=b"{}",
        timestamp=1_700_000_000,
        delivery_id="dlv_1",
        attempt=1,
        deadline_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    assert headers["x-github-event"] == "ping"
    assert headers["x-github-delivery"] == "evt_1"
    assert headers["x-hub-signature-256"].startswith("sha256=")


async def _needs_key(request: Request) -> Response:
    await request.body()
    if request.headers.get("x-api-key") != "k-123":
        return JSONResponse({"error": "gateway: no API key"}, status_code=403)
    return JSONResponse({"ok": True})


def test_a_header_the_endpoint_needs_reaches_every_request_and_is_redacted() -> None:
    """Behind a gateway that wants an API key, nothing passes without --header and the valid
    delivery passes with it; the key reaches the simulator's requests too, and a reproduction
    shows it redacted unless --show-secrets. A header that carries no credential is shown."""
    app, seen = _recording(_needs_key)
    chosen = ("signature.valid", "signature.tampered-body", "idempotency.sequential-duplicate")
    without = run_in_process(app, app_settings(None, select=chosen))
    assert without["signature.valid"].outcome is Outcome.FAILED
    seen.clear()
    given = (("X-Api-Key", "k-123"), ("X-Tenant", "acme"))
    results = run_in_process(app, app_settings(None, select=chosen, headers=given))
    assert results["signature.valid"].outcome is Outcome.PASSED
    assert results["idempotency.sequential-duplicate"].outcome is Outcome.PASSED
    assert seen
    assert all(h.get("x-api-key") == "k-123" for h in seen)
    # The gateway answers the tampered copy 403: a refusal, graded as a convention (401 wanted).
    refused = results["signature.tampered-body"]
    assert refused.outcome is Outcome.FAILED
    reproduction = refused.failures[0].reproduce
    assert "x-api-key: <redacted>" in reproduction
    assert "k-123" not in reproduction
    assert "x-tenant: acme" in reproduction
    shown = run_in_process(app, app_settings(None, select=chosen, headers=given, show_secrets=True))
    assert "x-api-key: k-123" in shown["signature.tampered-body"].failures[0].reproduce


def test_a_header_can_replace_the_platforms_own() -> None:
    app, seen = _recording(_accept)
    settings = app_settings(
        None,
        scheme="github",
        secrets=(GITHUB_SECRET,),
        select=("signature.valid",),
        headers=(("X-GitHub-Event", "push"),),
    )
    assert run_in_process(app, settings)["signature.valid"].outcome is Outcome.PASSED
    assert {h["x-github-event"] for h in seen} == {"push"}


@pytest.mark.parametrize(
    "name", ["webhook-signature", "Webhook-Id", "webhook-timestamp", "Host", "Content-Length"]
)
def test_a_header_hookproof_sets_itself_is_a_usage_error(name: str) -> None:
    settings = app_settings(None, headers=((name, "x"),)).validate()
    with pytest.raises(UsageError, match="sets that header itself"):
        wire_options(settings, seed=1)


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("no colon here", "must be 'Name: value'"),
        ("bad name: x", "is not a header name"),
        ("X-Key: \u00e9t\u00e9\u2603", "must be Latin-1 text"),
        ("webhook-id: evt_forced", "sets that header itself"),
    ],
)
def test_a_bad_header_flag_is_one_line_and_exit_2(
    value: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["check", "http://127.0.0.1:9/webhooks", "--secret", SECRET, "-H", value])
    captured = capsys.readouterr()
    assert code == 2, captured
    lines = [line for line in (captured.out + captured.err).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert said in lines[0], lines


def test_the_config_file_takes_a_headers_table_with_environment_values(tmp_path: Path) -> None:
    config = tmp_path / "hookproof.toml"
    config.write_text('[headers]\nX-Api-Key = "${PARTNER_KEY}"\nX-Tenant = "acme"\n')
    values = load_config(str(config), environ={"PARTNER_KEY": "from-env"})
    assert values["headers"] == (("X-Api-Key", "from-env"), ("X-Tenant", "acme"))
    config.write_text("[headers]\nX-Retries = 3\n")
    with pytest.raises(ConfigError, match="must be a string"):
        load_config(str(config), environ={})
    config.write_text('[headers]\n"two words" = "x"\n')
    with pytest.raises(ConfigError, match="not a header name"):
        load_config(str(config), environ={})


def test_a_report_names_its_headers_and_replay_asks_for_their_values() -> None:
    settings = CheckSettings(
        url="http://x/webhooks", secrets=(SECRET,), headers=(("X-Api-Key", "k-123"),)
    )
    options = settings.report_options()
    assert options["headers"] == ["X-Api-Key"]
    assert "k-123" not in json.dumps(options)
    assert "k-123" not in repr(settings)
    document = {
        "target": "http://x/webhooks",
        "scheme": "standard",
        "options": options,
        "scenarios": [{"id": "signature.valid", "outcome": "failed"}],
    }
    base = CheckSettings(secrets=(SECRET,))
    with pytest.raises(UsageError, match="--header X-Api-Key"):
        plan_replay(document, base, {})
    again = plan_replay(document, base, {"headers": (("x-api-key", "k-123"),)})
    assert again.settings.headers == (("x-api-key", "k-123"),)


def _github_signature(body: bytes) -> str:
    return "sha256=" + hmac.new(GITHUB_SECRET.encode(), body, hashlib.sha256).hexdigest()


def _github_receiver(*, on_bad_id: str) -> Starlette:
    """A GitHub receiver verifying by hand; ``on_bad_id``: what it does with a delivery id that
    is empty, not ASCII or over 100 characters (``refuse`` 400, ``accept``, ``crash`` 500)."""

    async def endpoint(request: Request) -> Response:
        body = await request.body()
        given = request.headers.get("x-hub-signature-256", "")
        if not hmac.compare_digest(given.encode(), _github_signature(body).encode()):
            return JSONResponse({"error": "signature"}, status_code=401)
        delivery = request.headers.get("x-github-delivery")
        if delivery is None:
            return JSONResponse({"error": "no delivery id"}, status_code=400)
        if not (delivery.isascii() and 0 < len(delivery) <= 100 and " " not in delivery):
            if on_bad_id == "refuse":
                return JSONResponse({"error": "bad delivery id"}, status_code=400)
            if on_bad_id == "crash":
                raise RuntimeError("the delivery id does not fit the inbox column")
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/webhooks", endpoint, methods=["POST"])])


@pytest.mark.parametrize(
    ("on_bad_id", "outcome", "severity"),
    [
        ("refuse", Outcome.PASSED, None),
        ("accept", Outcome.FAILED, Severity.SHOULD),
        ("crash", Outcome.FAILED, Severity.MUST),
    ],
)
def test_a_broken_unsigned_delivery_id_is_a_convention_unless_it_crashes(
    on_bad_id: str, outcome: Outcome, severity: Severity | None
) -> None:
    """The delivery id is not signed, so an authentic delivery with a garbage one is still
    authentic: accepting it is a should; a 5xx to it is a must (bad input). The signed headers'
    malformed shapes stay a must either way."""
    settings = app_settings(
        None,
        scheme="github",
        secrets=(GITHUB_SECRET,),
        select=("signature.malformed-unsigned-id", "signature.malformed-headers"),
    )
    results = run_in_process(_github_receiver(on_bad_id=on_bad_id), settings)
    assert results["signature.malformed-headers"].outcome is Outcome.PASSED
    result = results["signature.malformed-unsigned-id"]
    assert result.outcome is outcome
    assert [f.severity for f in result.failures] == ([] if severity is None else [severity])


def test_the_reference_receiver_refuses_a_broken_github_delivery_id() -> None:
    app = create_app(ReceiverSettings(secrets=[GITHUB_SECRET], db=":memory:", scheme="github"))
    settings = app_settings(
        None,
        scheme="github",
        secrets=(GITHUB_SECRET,),
        select=("signature.malformed-unsigned-id",),
    )
    assert run_in_process(app, settings)["signature.malformed-unsigned-id"].outcome is (
        Outcome.PASSED
    )
