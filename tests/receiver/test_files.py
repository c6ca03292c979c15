"""A file the user named is read as written, or refused in words: what it is, where, and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from receiver.commands.files import os_reason, read_text


class Refused(Exception):
    pass


def test_the_text_is_read_exactly_as_written(tmp_path: Path) -> None:
    path = tmp_path / "event.json"
    written = '{"type": "a",\r\n "note": "Grüße"}\r\n'.encode()
    path.write_bytes(written)
    text = read_text(path, "--event", Refused)
    assert text.encode("utf-8") == written  # line endings untouched: the file's bytes back


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda root: root / "missing.toml", "it does not exist"),
        (lambda root: root, "it is a folder, not a file"),
        (lambda root: root / "plain" / "below.toml", "a part of its path is not a folder"),
    ],
)
def test_a_file_that_cannot_be_read_says_why(tmp_path: Path, make: object, why: str) -> None:
    (tmp_path / "plain").write_text("a file, not a folder")
    path = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(Refused) as refused:
        read_text(path, "the config file", Refused)
    assert str(refused.value) == f"cannot read the config file {str(path)!r}: {why}"


def test_bytes_that_are_not_utf8_are_refused_in_words(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(b'{"target": "\xff\xfe"}')
    with pytest.raises(Refused, match=r"cannot read the report .*: it is not UTF-8 text"):
        read_text(path, "the report", Refused)


def test_a_missing_folder_when_writing_is_named_as_such(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as failure:
        (tmp_path / "nope" / "out.csv").write_text("x")
    assert os_reason(failure.value, writing=True) == "its folder does not exist"
    assert os_reason(failure.value) == "it does not exist"
