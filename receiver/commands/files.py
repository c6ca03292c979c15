"""Reading a file the user named — a config, a report, an event, a policy, a template, a log —
with one answer when it cannot be read: what it is, where, and why, in words (the same words,
:func:`os_reason`, when a file the user named cannot be written).

Every command that takes such a file reads it here, so each says the same thing the same way
("cannot read the config file 'x.toml': it is a folder, not a file") instead of an exception's
class name; the caller passes the exception its own package raises for a usage mistake.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

__all__ = ["os_reason", "read_text"]

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
