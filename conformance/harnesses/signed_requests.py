"""What the runner puts on the wire: signed requests, their deliberate mutations, and redaction.

:class:`WireScheme` holds the run's scheme and secrets and adapts the scheme object
(``receiver.signing``) to what scenarios need: the roles (event id, timestamp, signature) to drop
or break, a second signature (rotation) or one of an unknown version, the valid signature among
decoys; the scheme object knows how for its scheme, this module draws the seeded randomness and
never branches on a scheme's name. :class:`WireRequest` is an immutable
record of one request exactly as sent, which renders itself as a runnable ``curl`` command with
the signatures redacted (unless asked otherwise).
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from conformance.exceptions import UsageError
from conformance.extra_headers import RequestHeaders
from conformance.model import scheme_choices
from conformance.shell import curl_command
from receiver.exceptions import ConfigurationError as ReceiverConfigurationError
from receiver.redaction import REDACTED, shown_url
from receiver.signing import Scheme, Secret, random_bytes, scheme_named

__all__ = [
    "MUTATIONS",
    "REDACTED",
    "WireRequest",
    "WireScheme",
    "canonical_name",
    "padded",
    "redact_signature",
    "unusual_json",
    "with_charset",
]

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class WireRequest:
    """One HTTP request exactly as sent: the bytes of the body and every header in order."""

    url: str
    headers: Headers
    body: bytes
    method: str = "POST"

    def header(self, name: str) -> bytes | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def httpx_headers(self) -> list[tuple[bytes, bytes]]:
        return [(name.encode("latin-1"), value) for name, value in self.headers]

    def curl(
        self,
        *,
        signature_header: str | None,
        show_secrets: bool = False,
        credentials: frozenset[str] = frozenset(),
        clear_fields: frozenset[str] = frozenset(),
    ) -> str:
        """A runnable ``curl`` command that sends these exact bytes
        (:func:`conformance.shell.curl_command`); by default the signature header's values and
        the values of the ``credentials`` headers (a gateway's API key) redacted."""
        headers = [
            (
                name,
                self._shown(name, value, signature_header, credentials, show_secrets, clear_fields),
            )
            for name, value in self.headers
        ]
        body = self.body if self.body or self.method == "POST" else None
        url = shown_url(self.url, show_secrets=show_secrets)
        return curl_command(self.method, url, headers, body)

    @staticmethod
    def _shown(
        name: str,
        value: bytes,
        signature_header: str | None,
        credentials: frozenset[str],
        show_secrets: bool,
        clear_fields: frozenset[str],
    ) -> bytes:
        if show_secrets:
            return value
        if name == signature_header:
            return redact_signature(value.decode("latin-1"), clear_fields).encode("latin-1")
        if name in credentials:
            return REDACTED.encode()
        return value


_TOKEN = re.compile(r"(?P<name>[A-Za-z0-9_-]+)(?P<sep>[,=])(?P<value>[^\s,]+)")


def redact_signature(value: str, clear: frozenset[str] = frozenset()) -> str:
    """Keep a signature header's structure (``v1,``, ``t=``, ``sha256=``) and hide its values,
    but for the ``name=value`` items named in ``clear`` (the scheme's fields not derived from the
    secret: Stripe's ``t``)."""

    def hide(match: re.Match[str]) -> str:
        if match["name"] in clear and match["sep"] == "=":
            return match[0]
        return f"{match['name']}{match['sep']}{REDACTED}"

    redacted = _TOKEN.sub(hide, value)
    return redacted if redacted != value or not value else REDACTED


def unusual_json(document: Any) -> bytes:
    """Valid JSON no serializer would produce: odd whitespace, ``\\/`` and ``\\uXXXX`` escapes.

    A receiver that verifies a re-serialization of the parsed body instead of the raw bytes
    received cannot verify this.
    """

    def render(value: Any, depth: int) -> str:
        pad = "\n" + "\t" * (depth + 1)
        if isinstance(value, dict):
            if not value:
                return "{ }"
            items = [f"{pad}{string(str(k))} :\t{render(v, depth + 1)}" for k, v in value.items()]
            return "{" + " ,".join(items) + "\n" + "\t" * depth + "}"
        if isinstance(value, list):
            if not value:
                return "[ ]"
            return "[ " + " , ".join(render(v, depth + 1) for v in value) + " ]"
        if isinstance(value, str):
            return string(value)
        return json.dumps(value)

    def string(text: str) -> str:
        out = []
        for index, char in enumerate(text):
            if index == 0 or ord(char) > 0x7E:
                out.append("".join(f"\\u{unit:04x}" for unit in _utf16(char)))
            elif char == "/":
                out.append("\\/")
            else:
                out.append(json.dumps(char)[1:-1])
        return '"' + "".join(out) + '"'

    return (render(document, 0) + "\n").encode("ascii")


def _utf16(char: str) -> list[int]:
    encoded = char.encode("utf-16-be")
    return [int.from_bytes(encoded[i : i + 2], "big") for i in range(0, len(encoded), 2)]


def _flip_inside_string(body: bytes) -> bytes:
    """Change one byte inside the body: still valid JSON, no longer what was signed."""
    for index in range(len(body) - 1, -1, -1):
        byte = body[index]
        if 0x61 <= byte <= 0x7A or 0x30 <= byte <= 0x39:
            flipped = 0x61 + (byte - 0x61 + 1) % 26 if byte >= 0x61 else 0x30 + (byte - 0x2F) % 10
            return body[:index] + bytes([flipped]) + body[index + 1 :]
    return body + b" "


@dataclass(frozen=True)
class WireScheme:
    """Builds signed requests for one scheme and knows where each role lives."""

    name: str
    secrets: tuple[Secret, ...]

    def __post_init__(self) -> None:
        self.scheme  # noqa: B018 - validates the name now
        if not self.secrets:
            raise UsageError("at least one secret is required (--secret)")
        for secret in self.secrets:
            try:
                self.scheme.key(secret)
            except Exception as error:  # ConfigurationError, without the value
                raise UsageError(f"secret unusable for the {self.name} scheme: {error}") from None

    @property
    def scheme(self) -> Scheme:
        """The scheme object (:mod:`receiver.schemes`) that owns everything about the scheme."""
        try:
            return scheme_named(self.name)
        except Exception:
            raise UsageError(f"unknown scheme {self.name!r}; choose {scheme_choices()}") from None

    @property
    def uses_timestamp(self) -> bool:
        return self.scheme.uses_timestamp

    @functools.cached_property
    def keys(self) -> tuple[bytes, ...]:
        """The HMAC keys of :attr:`secrets`, derived once."""
        return tuple(self.scheme.key(secret) for secret in self.secrets)

    def agreeing(self, request: WireRequest) -> WireRequest:
        """``request`` as it goes on the wire: a companion signature the platform sends beside
        its own (GitHub's SHA-1) only where the scheme's own signature is genuine
        (:meth:`receiver.schemes.base.Scheme.agreeing`); a scheme without companions sends its
        requests as they are."""
        if not self.scheme.companion_headers:
            return request
        headers = self.scheme.agreeing(request.headers, request.body, keys=self.keys)
        return request if headers == request.headers else replace(request, headers=headers)

    def request_headers(self, given: Sequence[tuple[str, str]] = ()) -> RequestHeaders:
        """The unsigned headers of every delivery: the platform's (the scheme's delivery
        headers), with the user's ``--header`` values applied (:mod:`conformance.extra_headers`)."""
        scheme = self.scheme
        signed = scheme.header_names | scheme.companion_headers
        return RequestHeaders.build(scheme.delivery_headers, given, signed=signed)

    @property
    def signature_header(self) -> str:
        return self.scheme.signature_header

    @property
    def id_in_body(self) -> bool:
        return self.scheme.id_in_body

    def sign(
        self, body: bytes, *, event_id: str, timestamp: int, secrets: Sequence[Secret] | None = None
    ) -> dict[str, str]:
        chosen = list(secrets) if secrets is not None else [self.secrets[0]]
        return self.scheme.sign(body, secrets=chosen, event_id=event_id, timestamp=timestamp)

    def truncated(self, body: bytes, *, event_id: str, timestamp: int, keep: int) -> str:
        """A signature header value carrying only the first ``keep`` bytes of the genuine
        signature (the first secret's), encoded as the scheme encodes it: for a ``keep`` that
        is a multiple of 3, a prefix of the genuine value's text in base64 and in hex alike."""
        scheme = self.scheme
        digest = scheme.digest(body, secret=self.secrets[0], event_id=event_id, timestamp=timestamp)
        return scheme.signature_with(digest[:keep], timestamp=timestamp)

    def case_swapped(self, body: bytes, *, event_id: str, timestamp: int) -> str:
        """The genuine signature header value (the first secret's) with every letter of its
        signature text in the other case: under base64 other bytes, which only a comparison
        that ignores case (``strcasecmp``, ``EqualFold``, both sides lower-cased) accepts."""
        scheme = self.scheme
        digest = scheme.digest(body, secret=self.secrets[0], event_id=event_id, timestamp=timestamp)
        header = scheme.signature_with(digest, timestamp=timestamp)
        for value in scheme.signature_values({scheme.signature_header: header}):
            header = header.replace(value, value.swapcase())
        return header

    def signatures_of(self, headers: dict[str, str]) -> list[str]:
        """The secret-derived values in a signature header (to scrub from echoed bodies)."""
        return self.scheme.signature_values(headers)

    def extra_signature(
        self,
        headers: dict[str, str],
        *,
        kind: str,
        body: bytes,
        event_id: str,
        timestamp: int,
        rng: random.Random,
    ) -> dict[str, str]:
        """Prepend a signature the receiver must skip: ``rotation`` (another secret) or
        ``unknown-version`` (a version it does not know), keeping the valid one second."""
        other = random_bytes(rng, 32)
        try:
            return self.scheme.decoy(
                headers, kind=kind, body=body, event_id=event_id, timestamp=timestamp, key=other
            )
        except ReceiverConfigurationError as error:
            raise UsageError(str(error)) from None

    def listed(
        self,
        headers: dict[str, str],
        *,
        position: str,
        body: bytes,
        event_id: str,
        timestamp: int,
        rng: random.Random,
    ) -> dict[str, str]:
        """The valid signature ``first``, ``middle`` or ``last`` among two the receiver must skip:
        one of the current version signed with another key and one of an unknown version."""
        other = random_bytes(rng, 32)
        unknown = random_bytes(rng, 32)
        try:
            return self.scheme.listed(
                headers,
                position=position,
                body=body,
                event_id=event_id,
                timestamp=timestamp,
                key=other,
                unknown=unknown,
            )
        except ReceiverConfigurationError as error:
            raise UsageError(str(error)) from None

    def drop(self, role: str, headers: dict[str, str], body: bytes) -> tuple[dict[str, str], bytes]:
        """Remove one role (``id``, ``timestamp``, ``signature``) from a signed request."""
        try:
            return self.scheme.drop(role, headers, body, secrets=[self.secrets[0]])
        except ReceiverConfigurationError as error:
            raise UsageError(str(error)) from None

    def roles(self) -> tuple[str, ...]:
        return self.scheme.roles

    def malformed(
        self, headers: dict[str, str], rng: random.Random, count: int, *, unsigned: bool = False
    ) -> list[dict[str, bytes]]:
        """``count`` seeded variants of ``headers`` with one of the scheme's own header values
        broken: one the signature covers, or (``unsigned``) one it does not (then an invalid
        id). A companion signature (GitHub's SHA-1) is never the one broken: the scheme's own
        signature still authenticates such a request."""
        outside = self.scheme.unsigned_headers
        own = self.scheme.header_names | outside
        names = [name for name in headers if name in own and (name in outside) is unsigned]
        cases: list[dict[str, bytes]] = []
        for index in range(count if names else 0):
            name = names[index % len(names)]
            if name in outside:  # not covered by the signature: only invalid ids
                value = rng.choice(_INVALID_IDS)
            else:
                value = rng.choice(_JUNK) if index % 3 else _random_printable(rng)
            broken = {k: v.encode("latin-1") for k, v in headers.items()}
            broken[name] = value.strip(b" \t")  # HTTP forbids surrounding whitespace
            cases.append(broken)
        return cases


_JUNK = (
    b"",
    b" ",
    b",",
    b"=",
    b"v1",
    b"v1,",
    b"v1,!!!",
    b"\xff\xfe",
    b"t=",
    b"sha256=",
    b"-1",
    b"1e9",
    b"12.5",
    b" 42",
    b"0x10",
    b"9" * 40,
    b"a" * 5000,
    b"v1,===",
    b"t=abc,v1=zz",
    b"sha256=" + b"g" * 64,
    b"%00",
    b'"quoted"',
    b"null",
)
"""Junk for any header of any scheme: every scheme's shapes mixed, so each gets the others'."""
_INVALID_IDS = (b"", b"two words", b"\xff\xfe", b"x" * 5000)


def _random_printable(rng: random.Random) -> bytes:
    alphabet = bytes(range(0x20, 0x7F)) + bytes(range(0xA0, 0x100))
    return bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 80)))


def tamper(body: bytes) -> bytes:
    """The body with one character changed: still JSON, no longer what was signed."""
    return _flip_inside_string(body)


def padded(body: bytes, size: int) -> bytes:
    """``body`` (a JSON object) grown to at least ``size`` bytes by a ``"padding"`` member; still
    valid JSON with the same members otherwise."""
    text = body.rstrip()
    if not text.endswith(b"}"):
        return body + b" " * max(0, size - len(body))
    filler = b"x" * max(0, size - len(text))
    return text[:-1] + b',"padding":"' + filler + b'"}'


def hashed(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


MUTATIONS: tuple[str, ...] = (
    "none",
    "tampered-body",
    "wrong-secret",
    "secret-hint",
    "missing:id",
    "missing:timestamp",
    "missing:signature",
    "rotation",
    "unknown-version",
    "listed:first",
    "listed:middle",
    "listed:last",
    "garbled",
    "canonical-names",
    "charset",
)
"""The named ways a ``deliver`` step may break or vary a correctly signed request."""


def with_charset(content_type: bytes | None) -> bytes:
    """``content_type`` (``None``: ``application/json``) with a charset parameter as other
    senders write it: ``; charset=utf-8`` added, or, to one that has a charset already (Stripe's),
    ``;charset=UTF-8`` instead (Java's and Spring's spelling)."""
    given = content_type or b"application/json"
    media_type = given.split(b";", 1)[0].strip()
    if b"charset" in given.lower():
        return media_type + b";charset=UTF-8"
    return media_type + b"; charset=utf-8"


def canonical_name(name: str) -> str:
    """A header name as Go's ``net/http`` writes it (``webhook-id`` → ``Webhook-Id``): HTTP
    field names are case-insensitive, and many senders do not send them in lower case."""
    return "-".join(part.capitalize() for part in name.split("-"))


def with_header(request: WireRequest, name: str, value: bytes) -> WireRequest:
    return replace(request, headers=(*request.headers, (name, value)))
