"""Shell words that reproduce bytes exactly: how a reproduction ``curl`` carries any header
value and any body — multi-line, not UTF-8, with NUL bytes — through a POSIX shell.

- A printable UTF-8 value on one line is single-quoted as it is (``shlex.quote``).
- Any other header value is an ANSI-C quoted word (``$'…'`` with ``\\xHH`` escapes: bash, zsh,
  ksh), so a reproduction stays one line and survives copy and paste.
- Any other body is piped in through ``printf`` with octal escapes (POSIX ``printf``; a NUL byte
  cannot be part of a command-line argument at all) and read by ``curl --data-binary @-``.
- A body holding a long run of one byte (the padding of the size scenarios: a body just under a
  1 MiB limit, or twice over it) is piped in too, its runs written by
  ``head -c N /dev/zero | tr '\\000' …`` between ``printf`` parts: the same bytes, in a command a
  terminal can show, instead of a megabyte on one line.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

__all__ = ["LONG_RUN", "ansi_c_word", "body_producer", "curl_command", "is_plain", "printf_word"]

_SAFE = frozenset(range(0x20, 0x7F)) - {ord("'"), ord("\\")}
LONG_RUN = 256
"""Runs of one byte at least this long are written by ``head | tr`` instead of spelled out."""
_RUNS = re.compile(rb"(.)\1{%d,}" % (LONG_RUN - 1), re.DOTALL)


def is_plain(data: bytes) -> bool:
    """Whether ``data`` is printable UTF-8 on one line (quoted as it is)."""
    try:
        return data.decode("utf-8").isprintable()
    except UnicodeDecodeError:
        return False


def ansi_c_word(data: bytes) -> str:
    """``data`` as a ``$'…'`` word (no NUL byte: a shell argument cannot carry one)."""
    if b"\x00" in data:
        raise ValueError("a shell argument cannot carry a NUL byte")
    escaped = "".join(
        chr(byte) if byte in _SAFE else "\\" + chr(byte) if byte in b"'\\" else f"\\x{byte:02x}"
        for byte in data
    )
    return f"$'{escaped}'"


def printf_word(data: bytes) -> str:
    """``data`` as a single-quoted ``printf`` format that prints exactly these bytes (a leading
    ``-`` escaped too: dash's ``printf`` takes a format starting with one for an option)."""
    safe = _SAFE - {ord("%")}
    word = "".join(chr(b) if b in safe else f"\\{b:03o}" for b in data)
    return "'" + ("\\055" + word[1:] if word.startswith("-") else word) + "'"


def _run_word(byte: int, count: int) -> str:
    """A pipeline printing ``count`` copies of ``byte``."""
    zeros = f"head -c {count} /dev/zero"
    if byte == 0:
        return zeros
    target = chr(byte) if byte < 0x80 and chr(byte).isalnum() else f"\\{byte:03o}"
    return f"{zeros} | tr '\\000' '{target}'"


def body_producer(body: bytes) -> str:
    """A POSIX shell command that writes exactly ``body`` to its standard output: one ``printf``,
    or, around long runs of one byte (:data:`LONG_RUN`), a group of ``printf`` and ``head | tr``
    parts."""
    parts: list[str] = []
    at = 0
    for run in _RUNS.finditer(body):
        if run.start() > at:
            parts.append(f"printf {printf_word(body[at : run.start()])}")
        parts.append(_run_word(body[run.start()], run.end() - run.start()))
        at = run.end()
    if not parts:
        return f"printf {printf_word(body)}"
    if at < len(body):
        parts.append(f"printf {printf_word(body[at:])}")
    return "{ " + "; ".join(parts) + "; }"


def _word(data: bytes) -> str:
    return shlex.quote(data.decode("utf-8")) if is_plain(data) else ansi_c_word(data)


def curl_command(
    method: str, url: str, headers: Sequence[tuple[str, bytes]], body: bytes | None
) -> str:
    """A ``curl`` command that sends exactly ``headers`` and ``body`` (``None``: no body)."""
    parts = ["curl", "-sS", "-i", "-X", shlex.quote(method), shlex.quote(url)]
    for name, value in headers:
        parts += ["-H", _word(name.encode("latin-1") + b": " + value)]
    if body is None:
        return " ".join(parts)
    if is_plain(body) and _RUNS.search(body) is None:
        return " ".join([*parts, "--data-binary", shlex.quote(body.decode("utf-8"))])
    return f"{body_producer(body)} | " + " ".join([*parts, "--data-binary", "@-"])
