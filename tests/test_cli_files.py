"""Every command that reads a file the user named says, in one line and with exit status 2,
why it cannot: a folder, or bytes that are not UTF-8 text (never a class name, never a
traceback); a file it cannot write is said before the run, not after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.cli import main
from tests.support.cli import usage_error_line

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
URL = "http://127.0.0.1:9/webhooks"  # nothing listens: every refusal comes before any request

READERS = [
    (["check", URL, "--secret", SECRET, "--config", "{path}"], "the config file"),
    (["check", URL, "--secret", SECRET, "--event-template", "{path}"], "the event template"),
    (["replay", "{path}"], "the report"),
    (["send", URL, "--secret", SECRET, "--event", "{path}"], "--event"),
    (["send", URL, "--secret", SECRET, "--policy-file", "{path}"], "the policy file"),
    (["shadow", "{path}"], "the attempts log"),
    (
        ["sandbox", "--forward-to", URL, "--secret", SECRET, "--template", "{path}"],
        "--template",
    ),
]
SENDER_CHECK = ["check-sender", "--secret", SECRET, "--trigger", "true", "--policy", "{path}"]
"""Its --policy names a built-in profile or a file: a folder is neither (it says so), bytes that
are not UTF-8 are an unreadable file like any other."""
CASES = [
    *((argv, what, kind) for argv, what in READERS for kind in ("folder", "not-utf8")),
    (SENDER_CHECK, "the policy file", "not-utf8"),
]


@pytest.mark.parametrize(
    ("argv", "what", "kind"), CASES, ids=[f"{a[0]} {w} {k}" for a, w, k in CASES]
)
def test_an_unreadable_file_is_one_line_saying_why(
    argv: list[str],
    what: str,
    kind: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HOOKPROOF_SECRET", raising=False)
    if kind == "folder":
        path = tmp_path / "given"
        path.mkdir()
        why = "it is a folder, not a file"
    else:
        path = tmp_path / "given.bin"
        path.write_bytes(b"\xff\xfe\x00garbage")
        why = "it is not UTF-8 text"
    line = usage_error_line([part.replace("{path}", str(path)) for part in argv], capsys)
    assert f"cannot read {what} {str(path)!r}: {why}" in line


@pytest.mark.parametrize("option", ["--json", "--junit", "--ndjson"])
def test_a_report_path_that_is_a_folder_is_refused_before_the_run(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = usage_error_line(["check", URL, "--secret", SECRET, option, str(tmp_path)], capsys)
    assert line.endswith(f"cannot write the report {str(tmp_path)!r}: it is a folder, not a file")


def test_an_export_into_a_missing_folder_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    main(["endpoints", "add", "shop", URL, "--secret", SECRET])
    capsys.readouterr()
    target = tmp_path / "missing" / "rows.csv"
    line = usage_error_line(["deliveries", "export", "--csv", str(target)], capsys)
    assert line.endswith(f"cannot write --csv {target}: its folder does not exist")


DEEP_JSON = '{"type": "a", "data": ' + "[" * 100_000 + "]" * 100_000 + "}"
DEEP_TOML = "delays = " + "[" * 100_000 + "]" * 100_000 + "\n"
NESTED_CASES = [
    (["send", URL, "--secret", SECRET, "--event", "{path}"], "--event", "JSON"),
    (["replay", "{path}"], "the report", "JSON"),
    (
        ["sandbox", "--forward-to", URL, "--secret", SECRET, "--template", "{path}"],
        "--template",
        "JSON",
    ),
    (["check", "--config", "{path}"], "the config file", "TOML"),
    (["send", URL, "--secret", SECRET, "--policy-file", "{path}"], "the policy file", "TOML"),
    (
        ["check-sender", "--secret", SECRET, "--trigger", "true", "--policy", "{path}"],
        "the policy file",
        "TOML",
    ),
]


@pytest.mark.parametrize(
    ("argv", "what", "language"),
    NESTED_CASES,
    ids=[f"{a[0]} {w} {lang}" for a, w, lang in NESTED_CASES],
)
def test_a_file_nested_past_the_stack_is_one_line_not_a_traceback(
    argv: list[str],
    what: str,
    language: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / f"deep.{language.lower()}"
    path.write_text(DEEP_JSON if language == "JSON" else DEEP_TOML)
    line = usage_error_line([part.replace("{path}", str(path)) for part in argv], capsys)
    assert (
        f"cannot read {what} {str(path)!r}: it is not valid {language} (nested too deeply" in line
    )
