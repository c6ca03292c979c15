"""Headers sent with every webhook: the platform's own, and those the partner's endpoint needs.

Every delivery carries its scheme's *delivery headers* (``Scheme.delivery_headers``: the content
type, GitHub's ``X-GitHub-Event`` …) besides the signed ones. ``--header 'Name: value'``
(repeatable; a ``[headers]`` table in the config) adds what the partner's endpoint needs on top —
a gateway's API key, basic auth, another event name — or replaces one of the platform's. It
cannot replace what the scheme signs or what HTTP itself frames (``Host``, ``Content-Length`` …):
those are a :class:`~conformance.exceptions.UsageError`, as is a name that is not an HTTP token
or a value with a line break.

A header whose name says it carries a credential (:func:`receiver.redaction.is_credential`:
``Authorization``, ``Cookie``, or a name with ``key``, ``token``, ``secret``, ``auth``,
``password`` or ``session`` in it) has its value redacted from reproductions and answers unless
``--show-secrets``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from conformance.exceptions import UsageError
from receiver.redaction import is_credential

__all__ = ["RequestHeaders", "parse_header", "parse_headers"]

Pair = tuple[str, str]

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FRAMING = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "expect", "upgrade", "te"}
)
"""Headers HTTP itself sets: replacing them would break the request, not test the receiver."""


def parse_header(text: str, where: str = "--header") -> Pair:
    """``'Name: value'`` as ``(name, value)``; anything else is one :class:`UsageError`."""
    name, colon, value = text.partition(":")
    if not colon:
        raise UsageError(f"{where} {text!r} must be 'Name: value'")
    return checked(name.strip(), value.strip(), where)


def parse_headers(table: Mapping[str, object], where: str) -> tuple[Pair, ...]:
    """A config ``[headers]`` table (name = "value") as pairs, checked like ``--header``."""
    pairs = []
    for name, value in table.items():
        if not isinstance(value, str):
            raise UsageError(f"{where}: the value of header {name!r} must be a string")
        pairs.append(checked(name, value, where))
    return tuple(pairs)


def checked(name: str, value: str, where: str) -> Pair:
    """``(name, value)`` if it can be sent as one HTTP header field, else a UsageError."""
    if not _TOKEN.fullmatch(name):
        raise UsageError(f"{where}: {name!r} is not a header name (letters, digits, -, _ …)")
    if "\r" in value or "\n" in value or "\0" in value:
        raise UsageError(f"{where}: the value of {name!r} must be one line")
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        raise UsageError(f"{where}: the value of {name!r} must be Latin-1 text") from None
    return name, value


@dataclass(frozen=True)
class RequestHeaders:
    """The unsigned headers of every webhook of a run: the scheme's, overridden and extended by
    the user's (in that order, lower-case names)."""

    pairs: tuple[tuple[str, bytes], ...]
    credentials: frozenset[str] = frozenset()
    """Names whose values are redacted from reproductions and answers."""

    @classmethod
    def build(
        cls, platform: Sequence[Pair], given: Iterable[Pair], *, signed: Iterable[str]
    ) -> RequestHeaders:
        """``platform``'s headers with ``given`` applied; a given header that names one of the
        ``signed`` ones (the scheme's id, timestamp and signature) or an HTTP framing header is
        a UsageError."""
        reserved = {name.lower() for name in signed} | _FRAMING
        merged = dict(platform)
        for name, value in given:
            lowered = name.lower()
            if lowered in reserved:
                raise UsageError(
                    f"--header {name!r}: hookproof sets that header itself on every delivery"
                )
            merged[lowered] = value
        credentials = frozenset(name for name in merged if is_credential(name))
        return cls(tuple((k, v.encode("latin-1")) for k, v in merged.items()), credentials)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.pairs)

    def secret_values(self) -> set[str]:
        """The values to redact from answers (a receiver echoing an API key back)."""
        return {v.decode("latin-1") for k, v in self.pairs if k in self.credentials and v}
