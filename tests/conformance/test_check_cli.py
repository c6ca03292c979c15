"""``hookproof check`` and ``hookproof demo`` over real HTTP on loopback (the C harness): exit
codes 0/1/2, the console report, the JSON report's exact shape, the JUnit file, the config file,
redaction. One uvicorn server per receiver for the whole module."""

from __future__ import annotations

import json
import socket
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.catalogue import CATALOGUE
from conformance.cli import main
from conformance.config import CheckSettings
from conformance.model import Harness, Scenario
from conformance.session import plan
from receiver.app import ReceiverSettings, create_app
from receiver.server import running_server
from tests.conformance.broken_receivers import PROBE_TOKEN, plain_receiver
from tests.conformance.report_schema import validate_report
from tests.conformance.support import SECRET, other_schemes_only
from tests.support.cli import usage_error_line

C_IDS = [s.id for s in plan(CheckSettings(), Harness.C)]
"""Every C scenario, in the order a run takes them (and its reports list them)."""
SKIPPED = other_schemes_only()
"""Scenarios of other schemes than the standard one (skipped in a standard run)."""
PASSED = len(C_IDS) - len(SKIPPED)
FAST = ["--samples", "5", "--concurrency", "4", "--patience", "0"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("reference") / "inbox.sqlite"
    app = create_app(
        ReceiverSettings(secrets=[SECRET], db=str(db), probe_token=PROBE_TOKEN, max_body=65536)
    )
    with running_server(app) as base:
        yield base


@pytest.fixture(scope="module")
def no_dedupe() -> Iterator[str]:
    with running_server(plain_receiver(SECRET, bugs=frozenset({"no-dedupe"}))) as base:
        yield base


def _probe(base: str) -> list[str]:
    return ["--probe", f"{base}/_hookproof/events", "--probe-token", PROBE_TOKEN]


def test_the_reference_receiver_passes_every_c_scenario_over_http(
    reference: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report, junit = tmp_path / "report.json", tmp_path / "junit.xml"
    code = main(
        [
            "check",
            f"{reference}/webhooks",
            "--secret",
            SECRET,
            *_probe(reference),
            *FAST,
            "--max-body",
            "65536",
            "--json",
            str(report),
            "--junit",
            str(junit),
            "--seed",
            "5",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    document = json.loads(report.read_text())
    assert validate_report(document) == []
    assert [s["id"] for s in document["scenarios"]] == C_IDS
    assert document["summary"] == {
        "passed": PASSED,
        "failed": 0,
        "skipped": len(SKIPPED),
        "errors": 0,
    }
    by_id = {s["id"]: s for s in document["scenarios"]}
    assert by_id["idempotency.sequential-duplicate"]["observed_by"] == "probe"
    assert by_id["signature.malformed-headers"]["observed_by"] == "probe"
    assert by_id["response.within-timeout"]["observed_by"] is None
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert [case.get("name") for case in suite.iter("testcase")] == C_IDS
    assert suite.get("failures") == "0"
    assert suite.get("errors") == "0"
    assert "family" in out
    assert f"{PASSED} passed" in out
    assert SECRET not in out


def test_a_broken_receiver_exits_1_with_a_redacted_reproduction(
    no_dedupe: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report, junit = tmp_path / "report.json", tmp_path / "junit.xml"
    code = main(
        [
            "check",
            f"{no_dedupe}/webhooks",
            "--secret",
            SECRET,
            *_probe(no_dedupe),
            *FAST,
            "--select",
            "idempotency",
            "--select",
            "signature.valid",
            "--json",
            str(report),
            "--junit",
            str(junit),
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    document = json.loads(report.read_text())
    assert validate_report(document) == []
    failed = {s["id"]: s for s in document["scenarios"] if s["outcome"] == "failed"}
    assert "idempotency.sequential-duplicate" in failed
    failure = failed["idempotency.sequential-duplicate"]["failures"][0]
    assert failure["expected"] == "the probe shows exactly 1 effect"
    assert "2 effect(s)" in failure["observed"]
    assert failure["reproduce"].startswith("curl ")
    assert "webhook-signature: v1,<redacted>" in failure["reproduce"]
    assert "Bearer <redacted>" in failure["reproduce"]
    assert "guarantee:" in out
    assert "reproduce:" in out
    assert "expected:" in out
    assert SECRET not in out + report.read_text()
    cases = ET.parse(junit).getroot().iter("testcase")
    assert any(case.find("failure") is not None for case in cases)


def test_show_secrets_reveals_signatures_in_reproductions(
    no_dedupe: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.json"
    main(
        [
            "check",
            f"{no_dedupe}/webhooks",
            "--secret",
            SECRET,
            *_probe(no_dedupe),
            *FAST,
            "--select",
            "idempotency.sequential-duplicate",
            "--show-secrets",
            "--json",
            str(report),
        ]
    )
    capsys.readouterr()
    reproduce = json.loads(report.read_text())["scenarios"][0]["failures"][0]["reproduce"]
    assert "<redacted>" not in reproduce
    assert f"Bearer {PROBE_TOKEN}" in reproduce


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "http://127.0.0.1:{port}/webhooks", "--secret", SECRET], "never answered"),
        (
            [
                "check",
                "http://127.0.0.1:{port}/webhooks",
                "--secret",
                SECRET,
                "--wait-for-endpoint",
                "0.2",
            ],
            "never answered within 0.2 s",
        ),
        (["check", "ftp://example/x", "--secret", SECRET], "http:// or https://"),
        (["check", "http://127.0.0.1:99999/x", "--secret", SECRET], "port 99999 does not exist"),
        (["check", "http://[::1/x", "--secret", SECRET], "not a valid URL"),
        (["check", "http:///webhooks", "--secret", SECRET], "names no host"),
        (
            ["check", "http://bob:hunter2-long@127.0.0.1:99999/x", "--secret", SECRET],
            "'http://bob:<redacted>@127.0.0.1:99999/x' cannot be used",
        ),
        (
            [
                *["check", "http://127.0.0.1:{port}/", "--secret", SECRET],
                *["--probe", "http://bob:pw@127.0.0.1:{port}/p", "--probe-token", "t"],
            ],
            "names a user",
        ),
        (
            [
                *["check", "http://127.0.0.1:{port}/", "--secret", SECRET],
                *["--probe", "http://127.0.0.1:{port}/p?key=k", "--probe-token", "t"],
            ],
            "takes no ?query",
        ),
        (
            [
                *["check", "http://127.0.0.1:{port}/", "--secret", SECRET],
                *["--probe", "http://127.0.0.1:0/p", "--probe-token", "t"],
            ],
            "--probe URL",
        ),
        (["check", "http://127.0.0.1:{port}/webhooks"], "no secret"),
        (["check", "http://127.0.0.1:{port}/", "--secret", SECRET, "--timeout", "-1"], "timeout"),
        (
            ["check", "http://127.0.0.1:{port}/", "--secret", SECRET, "--select", "nope"],
            "matches no scenario",
        ),
        (["check", "http://127.0.0.1:{port}/", "--secret", "whsec_%%%"], "secret"),
        (
            ["check", "http://127.0.0.1:{port}/", "--secret", SECRET, "--probe", "http://x/p"],
            "--probe needs its token",
        ),
        (
            ["check", "http://127.0.0.1:{port}/", "--secret", SECRET, "--probe-token", "t"],
            "no --probe URL",
        ),
        (
            ["check", "http://127.0.0.1:{port}/", "--secret", SECRET, "--config", "missing.toml"],
            "does not exist",
        ),
        (
            [
                "check",
                "http://127.0.0.1:{port}/",
                "--secret",
                SECRET,
                "--event-template",
                "missing.json",
            ],
            "event template",
        ),
    ],
)
def test_usage_errors_and_an_unreachable_endpoint_exit_2_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    port = _free_port()
    line = usage_error_line([a.replace("{port}", str(port)) for a in argv], capsys)
    assert message in line


def test_a_malformed_config_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "hookproof.toml"
    config.write_text("url = 'http://127.0.0.1:1/x'\nsecret = [1, 2\n")
    assert main(["check", "--config", str(config)]) == 2
    assert "not valid TOML" in capsys.readouterr().err


def test_the_config_file_with_env_substitution_and_flags_overriding(
    reference: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PARTNER_SECRET", SECRET)
    monkeypatch.setenv("PARTNER_PROBE_TOKEN", PROBE_TOKEN)
    template = tmp_path / "event.json"
    template.write_text(
        '{"type": "invoice.paid", "id_ref": "{{event_id}}", "data": {"amount": 42}}'
    )
    (tmp_path / "pyproject.toml").write_text(
        "[tool.hookproof]\n"
        f"url = '{reference}/nowhere'\n"
        "secret = '${PARTNER_SECRET}'\n"
        f"probe = '{reference}/_hookproof/events'\n"
        "probe-token = '${PARTNER_PROBE_TOKEN}'\n"
        "select = ['signature.valid', 'idempotency.sequential-duplicate']\n"
        "event_template = 'event.json'\n"
    )
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "r.json"
    code = main(["check", f"{reference}/webhooks", "--json", str(report)])
    assert code == 0, capsys.readouterr().out
    document = json.loads(report.read_text())
    assert document["target"] == f"{reference}/webhooks"
    assert [s["id"] for s in document["scenarios"]] == [
        "signature.valid",
        "idempotency.sequential-duplicate",
    ]
    monkeypatch.delenv("PARTNER_SECRET")
    assert main(["check"]) == 2
    assert "PARTNER_SECRET" in capsys.readouterr().err


def test_demo_passes_every_scenario_against_the_reference_receiver(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = tmp_path / "demo.json"
    assert main(["demo", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "reference receiver listening on http://127.0.0.1:" in out
    document = json.loads(report.read_text())
    assert validate_report(document) == []
    assert document["summary"]["passed"] == PASSED
    assert all(s["observed_by"] in ("probe", None) for s in document["scenarios"])
    # ... and then the sender-side rest of the catalogue, on the simulator in process.
    sender_ids = [s.id for s in CATALOGUE.tagged(Harness.S)]
    assert f"{len(sender_ids)} sender-side scenarios" in out
    assert f"{len(sender_ids)} passed, 0 failed, 0 skipped, 0 errors" in out
    ran = {line.split("PASSED")[1].split()[0] for line in out.splitlines() if " PASSED " in line}
    assert ran == {s.id for s in CATALOGUE} - SKIPPED, "the demo runs the whole catalogue"


def test_demo_exits_1_when_a_sender_side_scenario_fails(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import conformance.harnesses.simulated as sender_harness
    from conformance.results import Outcome, ScenarioResult

    async def broken(self: object, scenario: Scenario) -> ScenarioResult:
        return ScenarioResult(scenario, Outcome.FAILED, None, 0.0, (), "simulated break")

    monkeypatch.setattr(sender_harness.SenderHarness, "run", broken)
    assert main(["demo", "--select", "deadline.retry-at"]) == 1
    assert "FAILED  deadline.retry-at" in capsys.readouterr().out


def test_without_a_probe_the_report_says_status_and_skips_what_needs_one(
    reference: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.json"
    code = main(
        [
            "check",
            f"{reference}/webhooks",
            "--secret",
            SECRET,
            *FAST,
            "--select",
            "response",
            "--select",
            "idempotency.concurrent-duplicates",
            "--json",
            str(report),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    document = json.loads(report.read_text())
    assert validate_report(document) == []
    by_id = {s["id"]: s for s in document["scenarios"]}
    assert by_id["response.ack-after-commit"]["outcome"] == "skipped"
    assert by_id["idempotency.concurrent-duplicates"]["observed_by"] == "status"
    skipped = {s["id"] for s in document["scenarios"] if s["outcome"] == "skipped"}
    for_other_schemes = {sid for sid in other_schemes_only() if sid.startswith("response.")}
    assert skipped == {"response.ack-after-commit"} | for_other_schemes
    assert document["summary"]["skipped"] == len(skipped)
    assert "no probe (status codes only)" in out
    assert "needs a probe" in out
