"""``hookproof replay REPORT.json``: the scenarios a report saw fail run again against its
target, FIXED (exit 0) once the receiver is fixed, STILL FAILING (exit 1) while it is not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance.cli import main
from receiver.server import running_server
from tests.conformance.broken_receivers import PROBE_TOKEN, plain_receiver
from tests.conformance.support import SECRET


class Switchable:
    """An ASGI app that forwards to whichever receiver is current (broken, then fixed)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


@pytest.fixture
def switch() -> Iterator[tuple[Switchable, str]]:
    app = Switchable(plain_receiver(SECRET, bugs=frozenset({"no-dedupe"})))
    with running_server(app) as base:
        yield app, base


def _check(base: str, report: Path) -> int:
    return main(
        [
            "check",
            f"{base}/webhooks",
            "--secret",
            SECRET,
            "--probe",
            f"{base}/_hookproof/events",
            "--probe-token",
            PROBE_TOKEN,
            "--select",
            "idempotency.sequential-duplicate",
            "--select",
            "signature.valid",
            "--seed",
            "11",
            "--json",
            str(report),
        ]
    )


def test_replay_says_still_failing_then_fixed_with_the_right_exit_codes(
    switch: tuple[Switchable, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app, base = switch
    report = tmp_path / "report.json"
    assert _check(base, report) == 1
    document = json.loads(report.read_text())
    assert document["seed"] == 11
    assert document["options"]["probe"] == f"{base}/_hookproof/events"
    assert PROBE_TOKEN not in report.read_text()
    assert SECRET not in report.read_text()
    capsys.readouterr()

    # the secret and the token come from the environment, as for `check`
    monkeypatch.setenv("HOOKPROOF_SECRET", SECRET)
    monkeypatch.setenv("HOOKPROOF_PROBE_TOKEN", PROBE_TOKEN)
    assert main(["replay", str(report)]) == 1
    out = capsys.readouterr().out
    assert "STILL FAILING  idempotency.sequential-duplicate" in out
    assert "signature.valid" not in out.split("STILL FAILING")[0]  # only failed ones replayed
    assert "0 of 1 scenario fixed" in out

    app.app = plain_receiver(SECRET)
    assert main(["replay", str(report)]) == 0
    out = capsys.readouterr().out
    assert "FIXED" in out
    assert "idempotency.sequential-duplicate" in out
    assert "STILL FAILING" not in out
    assert "1 of 1 scenario fixed" in out


def test_replay_of_a_clean_report_has_nothing_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.json"
    report.write_text(
        json.dumps(
            {
                "target": "http://127.0.0.1:9/webhooks",
                "scheme": "standard",
                "scenarios": [{"id": "signature.valid", "outcome": "passed"}],
            }
        )
    )
    assert main(["replay", str(report)]) == 0
    assert "nothing to replay" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("not json", "it is not valid JSON (line 1, column 1"),
        ("[1, 2]", "is not a 'hookproof check --json' report"),
        (
            '{"target": "sender", "scheme": "standard", "scenarios": []}',
            "is not an endpoint URL",
        ),
        (
            '{"target": "http://127.0.0.1:99999/x", "scheme": "standard", "scenarios": []}',
            "is not an endpoint URL",
        ),
        (
            '{"target": "http://127.0.0.1:9/x", "scheme": "nope", "scenarios": '
            '[{"id": "signature.valid", "outcome": "failed"}]}',
            "unknown scheme 'nope'",
        ),
    ],
)
def test_replay_of_something_that_is_not_a_report_is_one_usage_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    content: str,
    said: str,
) -> None:
    monkeypatch.setenv("HOOKPROOF_SECRET", SECRET)
    report = tmp_path / "report.json"
    report.write_text(content)
    assert main(["replay", str(report)]) == 2
    captured = capsys.readouterr()
    assert said in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert captured.out == ""  # nothing announced before the error


def test_replay_of_a_probed_report_asks_for_the_probe_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HOOKPROOF_PROBE_TOKEN", raising=False)
    report = tmp_path / "report.json"
    report.write_text(
        json.dumps(
            {
                "target": "http://127.0.0.1:9/webhooks",
                "scheme": "standard",
                "options": {"probe": "http://127.0.0.1:9/_hookproof/events"},
                "scenarios": [{"id": "signature.valid", "outcome": "failed"}],
            }
        )
    )
    assert main(["replay", str(report), "--secret", SECRET]) == 2
    assert "--probe-token" in capsys.readouterr().err
