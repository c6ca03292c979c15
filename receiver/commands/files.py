"""Reading a file the user named — a config, a report, an event, a policy, a template, a log —
with one answer when it cannot be read: what it is, where, and why, in words (the same words,
:func:`os_reason`, when a file the user named cannot be written); :func:`read_json` adds where a
JSON file stops being JSON, :func:`read_toml` where a TOML file stops being TOML.

Every command that takes such a file reads it here, so each says the same thing the same way
("cannot read the config file 'x.toml': it is a folder, not a file") instead of an exception's
class name; the caller passes the exception its own package raises for a usage mistake.
"""

from __future__ import annotations

import errno
import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["json_of", "os_reason", "read_json", "read_text", "read_toml", "toml_of"]

_REASONS = {
    errno.ENOENT: "it does not exist",
    errno.EISDIR: "it is a folder, not a file",
    errno.EACCES: "permission denied",
    errno.ENOTDIR: "a part of its path is not a folder",
}


def os_reason(failure: OSError, *, writing: bool = False) -> str:
    """Why a file could not be opened, read or (``writing``) written, in a few words."""
    if writing and failure.errno == errno.ENOENT:
        return "its folder does not exist"
    return _REASONS.get(failure.errno or 0) or failure.strerror or type(failure).__name__


def read_text(path: str | Path, what: str, error: Callable[[str], Exception]) -> str:
    """The UTF-8 text of ``path`` exactly as written (line endings untouched, so it encodes back
    to the file's bytes), or ``error("cannot read {what} '{path}': {why}")``."""
    try:
        return Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        why = "it is not UTF-8 text"
    except OSError as failure:
        why = os_reason(failure)
    raise error(f"cannot read {what} {str(path)!r}: {why}") from None


def read_json(path: str | Path, what: str, error: Callable[[str], Exception]) -> Any:
    """The JSON document in ``path`` (read as :func:`read_text` reads it), or ``error(...)``
    as :func:`json_of` says it."""
    return json_of(read_text(path, what, error), f"{what} {str(path)!r}", error)


def json_of(text: str, where: str, error: Callable[[str], Exception]) -> Any:
    """The JSON document ``text`` (read from ``where``), or ``error("cannot read {where}: it is
    not valid JSON (...)")`` saying where it stops being JSON; a document nested past Python's
    stack, or with a number too long to read, is refused the same way, never a traceback."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as failure:
        why = f"line {failure.lineno}, column {failure.colno}: {failure.msg}"
    except (ValueError, RecursionError):
        why = "nested too deeply, or a number too long to read"
    raise error(f"cannot read {where}: it is not valid JSON ({why})") from None


def read_toml(path: str | Path, what: str, error: Callable[[str], Exception]) -> dict[str, Any]:
    """The TOML document in ``path`` (read as :func:`read_text` reads it), or ``error(...)``
    as :func:`toml_of` says it."""
    return toml_of(read_text(path, what, error), f"{what} {str(path)!r}", error)


def toml_of(text: str, where: str, error: Callable[[str], Exception]) -> dict[str, Any]:
    """The TOML document ``text`` (read from ``where``), or ``error("cannot read {where}: it is
    not valid TOML (...)")``; arrays or tables nested past Python's stack included."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as failure:
        why = str(failure)
    except RecursionError:
        why = "nested too deeply"
    raise error(f"cannot read {where}: it is not valid TOML ({why})") from None
