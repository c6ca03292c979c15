"""The runner's building blocks: odd-but-valid JSON, tampering, redaction, the ``curl``
reproduction, the event template, and the config file (discovery, ``${ENV}``, strict keys)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from conformance.commands.check import check_command
from conformance.config import CheckSettings, load_config, substitute_env
from conformance.exceptions import ConfigError, UsageError
from conformance.harnesses.signed_requests import (
    WireRequest,
    WireScheme,
    redact_signature,
    tamper,
    unusual_json,
)
from conformance.payloads import PayloadFactory
from conformance.session import wire_options
from receiver.schemes.stripe import StripeStyle
from receiver.signing import Secret

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(json_values)
def test_unusual_json_is_valid_json_of_the_same_document(document: Any) -> None:
    rendered = unusual_json(document)
    assert json.loads(rendered) == document
    compact = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    assert rendered != compact


def test_tampering_keeps_json_but_changes_the_bytes() -> None:
    body = PayloadFactory().body("evt_1")
    changed = tamper(body)
    assert changed != body
    assert json.loads(changed)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("v1,abc123== v1,def456==", "v1,<redacted> v1,<redacted>"),
        ("t=1700000000,v1=deadbeef,v0=cafe", "t=1700000000,v1=<redacted>,v0=<redacted>"),
        (
            "t=1700000000,v1=deadbeef,secret=whsec_****abcd",
            "t=1700000000,v1=<redacted>,secret=whsec_****abcd",
        ),
        ("sha256=" + "a" * 64, "sha256=<redacted>"),
        ("garbage", "<redacted>"),
    ],
)
def test_signature_headers_are_redacted_keeping_their_structure(value: str, expected: str) -> None:
    """Only what the scheme says is not derived from the secret stays (Stripe's ``t`` and its
    masked ``secret=`` description); without that word every value is hidden."""
    assert redact_signature(value, StripeStyle.clear_fields) == expected
    assert "1700000000" not in redact_signature("t=1700000000,v1=deadbeef")


def test_the_curl_reproduction_sends_exactly_the_recorded_bytes() -> None:
    body = b'{"a": "it\'s \\"quoted\\""}'
    request = WireRequest(
        "http://127.0.0.1:8000/webhooks",
        (("webhook-id", b"evt_1"), ("webhook-signature", b"v1,c2VjcmV0")),
        body,
    )
    parts = shlex.split(request.curl(signature_header="webhook-signature"))
    assert parts[parts.index("--data-binary") + 1].encode() == body
    assert "webhook-signature: v1,<redacted>" in parts
    assert "webhook-id: evt_1" in parts
    shown = shlex.split(request.curl(signature_header="webhook-signature", show_secrets=True))
    assert "webhook-signature: v1,c2VjcmV0" in shown


def test_templates_substitute_ids_and_put_the_id_in_the_body_for_stripe() -> None:
    factory = PayloadFactory('{"type": "invoice.paid", "ref": "{{event_id}}"}', id_in_body=True)
    document = json.loads(factory.body("evt_9"))
    assert document == {"id": "evt_9", "type": "invoice.paid", "ref": "evt_9"}
    same = PayloadFactory('{"ref": "{{event_id}}"}')
    assert same.body("evt_a", reference="evt_x") == same.body("evt_b", reference="evt_x")
    with pytest.raises(UsageError, match="not JSON"):
        PayloadFactory("{nope").body("evt_1")
    with pytest.raises(UsageError, match="nested too deeply"):
        PayloadFactory("[" * 100_000 + "]" * 100_000).body("evt_1")


def test_the_stripe_scheme_sends_a_stripe_event_by_default() -> None:
    settings = CheckSettings(url="http://x/webhooks", secrets=("whsec_dGVzdA==",), scheme="stripe")
    options = wire_options(settings.validate(), seed=1)
    document = json.loads(options.payloads.body("evt_9"))
    assert list(document)[:2] == ["id", "object"]  # the id first, as Stripe renders an Event
    assert (document["id"], document["object"], document["livemode"]) == ("evt_9", "event", False)
    assert document["created"] == 1767225600  # occurred_at in Unix seconds
    assert document["data"]["object"]["reference"] == "evt_9"
    assert isinstance(document["api_version"], str)
    standard = wire_options(CheckSettings(url="http://x/", secrets=("whsec_dGVzdA==",)), seed=1)
    assert json.loads(standard.payloads.body("evt_9"))["type"] == "hookproof.conformance.ping"
    assert "object" not in json.loads(standard.payloads.body("evt_9"))


def test_a_wire_scheme_refuses_an_unusable_secret_without_showing_it() -> None:
    with pytest.raises(UsageError) as caught:
        WireScheme("standard", (Secret("whsec_!!!not-base64"),))
    assert "!!!not-base64" not in str(caught.value)


def test_env_substitution() -> None:
    env = {"A": "alpha"}
    assert substitute_env("x-${A}-${B:-beta}", "k", env) == "x-alpha-beta"
    with pytest.raises(ConfigError, match=r"\$\{C\}"):
        substitute_env("${C}", "secret", env)


def test_config_discovery_strict_keys_and_types(tmp_path: Path) -> None:
    assert load_config(cwd=tmp_path) == {}
    (tmp_path / "pyproject.toml").write_text("[tool.other]\nx = 1\n")
    assert load_config(cwd=tmp_path) == {}
    (tmp_path / "hookproof.toml").write_text(
        "timeout = 2\n[check]\nconcurrency = 3\nsecret = ['${S1}', 'b']\n"
    )
    values = load_config(cwd=tmp_path, environ={"S1": "s3cr3t-value"})
    assert values == {"timeout": 2, "concurrency": 3, "secrets": ("s3cr3t-value", "b")}
    settings = CheckSettings().merged(values).merged({"timeout": 4.0, "seed": None})
    assert settings.timeout == 4.0
    assert settings.concurrency == 3
    assert "s3cr3t-value" not in repr(settings)
    (tmp_path / "hookproof.toml").write_text("timeuot = 2\n")
    with pytest.raises(ConfigError, match="unknown key 'timeuot'"):
        load_config(cwd=tmp_path)
    (tmp_path / "hookproof.toml").write_text("timeout = 'slow'\n")
    with pytest.raises(ConfigError, match="'timeout': 'slow' is not a duration"):
        load_config(cwd=tmp_path)
    (tmp_path / "hookproof.toml").write_text("concurrency = 'three'\n")
    with pytest.raises(ConfigError, match="wrong type"):
        load_config(cwd=tmp_path)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("timeout = inf", "'timeout': inf is not a finite number of seconds"),
        ("max_time = nan", "'max_time': nan is not a finite number of seconds"),
        ("patience = -5", "'patience': -5 must not be negative"),
        ("settle = 1e400", "'settle': inf is not a finite number of seconds"),
    ],
)
def test_a_config_wait_that_would_never_end_is_refused(
    tmp_path: Path, line: str, says: str
) -> None:
    (tmp_path / "hookproof.toml").write_text(line + "\n")
    with pytest.raises(ConfigError, match=re.escape(says)):
        load_config(cwd=tmp_path)


@pytest.mark.parametrize("rate", [float("nan"), float("inf"), 0.0, -2.0])
def test_a_rate_limit_is_a_positive_finite_number(rate: float) -> None:
    settings = CheckSettings(url="http://127.0.0.1:9/w", secrets=("whsec_x",), rate_limit=rate)
    with pytest.raises(UsageError, match="--rate-limit must be a positive number"):
        settings.validate()


def test_the_rate_limiter_spaces_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from conformance.harnesses import state as wire_harness

    waits: list[float] = []

    async def record(delay: float) -> None:
        waits.append(delay)

    monkeypatch.setattr(wire_harness.time, "monotonic", lambda: 100.0)
    monkeypatch.setattr(wire_harness.asyncio, "sleep", record)
    limiter = wire_harness.RateLimiter(4.0)

    async def five() -> None:
        for _ in range(5):
            await limiter.wait()

    asyncio.run(five())
    assert waits == pytest.approx([0.25, 0.5, 0.75, 1.0])


def test_waiting_for_an_endpoint_retries_503_and_refused_connections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    import httpx

    from conformance import reachability
    from conformance.exceptions import EndpointUnreachable

    answers = iter(["refused", 503, 503, 405])

    def handler(request: httpx.Request) -> httpx.Response:
        answer = next(answers)
        if answer == "refused":
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(int(answer))

    async def no_wait(delay: float) -> None:
        return None

    monkeypatch.setattr(reachability.asyncio, "sleep", no_wait)

    async def go(within: float) -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            await reachability.wait_until_answering(
                client, "http://endpoint.test/webhooks", within=within, answer_within=1.0
            )

    asyncio.run(go(60.0))  # answered 405 at the fourth try: someone is listening
    answers = iter([503] * 3)
    with pytest.raises(EndpointUnreachable, match="503"):
        asyncio.run(go(0.0))


def test_a_plain_http_target_loads_no_ca_bundle_and_https_loads_it_once() -> None:
    """The CA bundle costs tens of milliseconds a load: none for http:// (the runner follows no
    redirect, so TLS never happens), one per process for https:// however many clients."""
    import asyncio
    import ssl

    from conformance import session

    session._verified_tls.cache_clear()
    settings = CheckSettings(url="http://127.0.0.1:9/webhooks", secrets=("whsec_dGVzdA==",))

    async def open_clients(url: str, count: int) -> None:
        for _ in range(count):
            async with session.url_client(settings, url):
                pass

    asyncio.run(open_clients("http://127.0.0.1:9/webhooks", 2))
    assert session._verified_tls.cache_info().currsize == 0
    asyncio.run(open_clients("https://partner.example/webhooks", 2))
    info = session._verified_tls.cache_info()
    assert (info.misses, info.hits) == (1, 1)
    assert session._verified_tls().verify_mode is ssl.CERT_REQUIRED


def test_settle_is_a_duration_in_the_config_and_on_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "hookproof.toml").write_text("settle = '2s'\n")
    values = load_config(cwd=tmp_path)
    assert values == {"settle": 2.0}
    assert CheckSettings().settle == 0  # the probe contract: effects show with the 2xx
    assert CheckSettings().merged(values).report_options()["settle"] == 2.0
    with pytest.raises(UsageError, match="--settle must not be negative"):
        CheckSettings(url="http://x/", secrets=("s",), settle=-1).validate()
    result = CliRunner().invoke(check_command, ["http://x/", "--secret", "s", "--settle", "soon"])
    assert result.exit_code == 2
    assert "'soon' is not a duration" in result.output
