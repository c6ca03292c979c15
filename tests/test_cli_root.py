"""The ``hookproof`` root command: help, version, and one-line errors with exit status 2."""

from __future__ import annotations

import pytest

from conformance.cli import COMMANDS, main
from tests.support.cli import usage_error_line


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out


def test_every_subcommand_is_importable_and_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for name in COMMANDS:
        assert main([name, "--help"]) == 0, name
        assert "Usage:" in capsys.readouterr().out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert "hookproof" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [["no-such-command"], ["--no-such-flag"], ["receiver", "--port", "not-a-number"]],
)
def test_usage_errors_are_one_line_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    usage_error_line(argv, capsys)


@pytest.mark.parametrize("argv", [[], ["dlq"]])
def test_a_bare_group_shows_its_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "Usage:" in captured.out
    assert captured.err == ""
