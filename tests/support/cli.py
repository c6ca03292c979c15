"""Running the root CLI in process and reading the one line a usage error must be."""

from __future__ import annotations

import pytest

from conformance.cli import main

__all__ = ["usage_error_line"]


def usage_error_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``hookproof argv``; assert it failed as a usage error does (exit status 2, one
    ``hookproof: error:`` line on stderr, nothing on stdout, no traceback) and return that line."""
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2, captured
    assert "Traceback" not in captured.err + captured.out
    assert captured.out == "", captured.out
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("hookproof: error:"), lines[0]
    return lines[0]
