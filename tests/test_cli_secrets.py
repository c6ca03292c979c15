"""``--secret`` means the same in every command: each value (and ``HOOKPROOF_SECRET``) may hold
several secrets separated by spaces, and every command that signs deliveries says once, before
any work, when a secret looks wrong for its scheme (a Standard Webhooks secret without
``whsec_``), as ``hookproof check`` does."""

from __future__ import annotations

import io
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from conformance.cli import main
from receiver.commands.options import secret_option

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
RAW = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # valid base64, but not how platforms hand it out
URL = "http://127.0.0.1:9/webhooks"  # nothing listens


@click.command()
@secret_option()
def _echo_secrets(secrets: tuple[str, ...]) -> None:
    click.echo(" | ".join(secrets))


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["--secret", "a b", "--secret", "c"], {}, "a | b | c"),
        ([], {"HOOKPROOF_SECRET": " a  b "}, "a | b"),
        ([], {}, ""),
    ],
)
def test_every_command_receives_the_secrets_split_on_spaces(
    args: list[str], env: dict[str, str], expected: str
) -> None:
    result = CliRunner().invoke(_echo_secrets, args, env=env)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == expected


SIGNING_COMMANDS = {
    "check": ["check", URL, "--select", "signature.valid"],
    "send": ["send", URL, "--db", "{tmp}/sender.sqlite"],
    "endpoints add": ["endpoints", "add", "shop", URL, "--db", "{tmp}/sender.sqlite"],
    "sandbox": ["sandbox", "--forward-to", URL, "--db", "{tmp}/sandbox.sqlite"],
}


def _warnings(
    argv: list[str],
    secrets: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> list[str]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HOOKPROOF_SECRET", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO("quit\n"))  # the sandbox leaves at once
    given = [part.replace("{tmp}", str(tmp_path)) for part in argv]
    for secret in secrets:
        given += ["--secret", secret]
    main(given)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return [line for line in err.splitlines() if line.startswith("hookproof: warning:")]


@pytest.mark.parametrize("command", sorted(SIGNING_COMMANDS))
def test_a_standard_secret_without_whsec_is_warned_about_once_by_every_signing_command(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = SIGNING_COMMANDS[command]
    (warning,) = _warnings(argv, [SECRET, RAW, f"{RAW} {SECRET}"], tmp_path, monkeypatch, capsys)
    assert warning.startswith("hookproof: warning: secret #2, #3 does not start with 'whsec_'")
    assert RAW not in warning  # the warning names a secret by its place, never by its value


@pytest.mark.parametrize("command", sorted(SIGNING_COMMANDS))
def test_a_whsec_secret_is_not_warned_about(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _warnings(SIGNING_COMMANDS[command], [SECRET], tmp_path, monkeypatch, capsys) == []
