"""The wire scheme: signing and verifying webhook deliveries, both halves in one place.

Three schemes sit behind one small interface, :class:`Scheme`:

* :class:`StandardWebhooks` (the default) — ``webhook-id``, ``webhook-timestamp`` and
  ``webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">``, ``whsec_`` secrets,
  several space-separated signatures, unknown versions ignored;
* :class:`StripeStyle` — ``stripe-signature: t=<ts>,v1=<hex>`` over ``"{t}.{body}"``, the key being
  the secret string's bytes; the event id is the body's top-level ``"id"``;
* :class:`GitHubStyle` — ``x-hub-signature-256: sha256=<hex>`` over the body, no timestamp (replay
  protection comes from the inbox alone); the event id is ``x-github-delivery``.

Verification works on the raw bytes received, compares in constant time, accepts several active
secrets (rotation) and reads the clock at call time unless ``now`` is given. A timestamp is accepted
iff ``now - tolerance <= timestamp <= now + tolerance`` in whole seconds (``now`` floored), so a
timestamp exactly ``tolerance`` seconds away is accepted and one second more is refused.
Every failure is a :class:`~receiver.exceptions.VerificationError`; no ``ValueError``,
``binascii.Error`` or ``UnicodeDecodeError`` escapes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from receiver.exceptions import (
    ConfigurationError,
    InvalidPayload,
    MalformedHeader,
    MissingHeader,
    SignatureMismatch,
    TimestampTooNew,
    TimestampTooOld,
)

__all__ = [
    "DEFAULT_TOLERANCE_S",
    "SCHEMES",
    "GitHubStyle",
    "Scheme",
    "Secret",
    "StandardWebhooks",
    "StripeStyle",
    "VerifiedMessage",
    "Verifier",
    "scheme_named",
]

DEFAULT_TOLERANCE_S = 300
MAX_EVENT_ID_LENGTH = 255
_MAX_TIMESTAMP_DIGITS = 12
_MAX_SIGNATURE_HEADER = 4096
_hmac_digest = hmac.digest
_compare = hmac.compare_digest
_a2b_base64 = binascii.a2b_base64
_new_object = object.__new__
_sha256 = hashlib.sha256
_BLOCK = 64  # SHA-256's block size
_TRANS_36 = bytes(x ^ 0x36 for x in range(256))
_TRANS_5C = bytes(x ^ 0x5C for x in range(256))
_PREPARED_LIMIT = 256
_prepared: dict[bytes, tuple[Any, Any]] = {}


def _prepare(key: bytes) -> tuple[Any, Any]:
    """HMAC-SHA256 (RFC 2104) with the key already absorbed: the inner and outer hash states.

    Copying two prepared states per message is about twice as fast as ``hmac.digest``, which
    sets the key up again on every call; the verify hot path is mostly that set-up.
    """
    found = _prepared.get(key)
    if found is None:
        block = (_sha256(key).digest() if len(key) > _BLOCK else key).ljust(_BLOCK, b"\0")
        found = (_sha256(block.translate(_TRANS_36)), _sha256(block.translate(_TRANS_5C)))
        if len(_prepared) >= _PREPARED_LIMIT:
            _prepared.clear()
        _prepared[key] = found
    return found


def _hmac_sha256(key: bytes, head: bytes, body: bytes) -> bytes:
    """``HMAC-SHA256(key, head + body)`` without concatenating ``head`` and ``body``."""
    inner_state, outer_state = _prepare(key)
    inner = inner_state.copy()
    inner.update(head)
    inner.update(body)
    outer = outer_state.copy()
    outer.update(inner.digest())
    digest: bytes = outer.digest()
    return digest


@dataclass(frozen=True, repr=False)
class Secret:
    """A signing secret as configured: the string the sender and receiver share.

    Its ``repr`` never shows the value, so a secret can be logged by accident without leaking.
    """

    value: str

    def __post_init__(self) -> None:
        if not isinstance(self.value, str) or not self.value.strip():
            raise ConfigurationError("a webhook secret must be a non-empty string")

    def __repr__(self) -> str:
        return "Secret('***')"

    def standard_key(self) -> bytes:
        """The HMAC key of Standard Webhooks: the base64 after an optional ``whsec_`` prefix."""
        encoded = self.value.removeprefix("whsec_")
        encoded += "=" * (-len(encoded) % 4)  # like the reference libraries: padding optional
        try:
            key = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise ConfigurationError(
                "a Standard Webhooks secret must be 'whsec_' followed by base64"
            ) from None
        if not key:
            raise ConfigurationError("a Standard Webhooks secret must not be empty")
        return key

    def raw_key(self) -> bytes:
        """The HMAC key of the Stripe- and GitHub-style schemes: the string's own bytes."""
        return self.value.encode("utf-8")


@dataclass(frozen=True)
class VerifiedMessage:
    """A delivery whose signature and timestamp were checked; ``body`` is the bytes signed."""

    event_id: str
    body: bytes
    scheme: str
    timestamp: int | None = None
    secret_index: int = 0

    def json(self) -> Any:
        """The body parsed as JSON, or :class:`InvalidPayload`."""
        return _parse_json(self.body)


def _verified(
    event_id: str, body: bytes, scheme: str, timestamp: int | None, secret_index: int
) -> VerifiedMessage:
    """``VerifiedMessage(...)`` at half the cost: a frozen dataclass's ``__init__`` pays one
    ``object.__setattr__`` per field, which is a visible share of the verify hot path."""
    message = _new_object(VerifiedMessage)
    fields = message.__dict__
    fields["event_id"] = event_id
    fields["body"] = body
    fields["scheme"] = scheme
    fields["timestamp"] = timestamp
    fields["secret_index"] = secret_index
    return message


def _parse_json(body: bytes) -> Any:
    if not body:
        raise InvalidPayload("the body is empty")
    try:
        return json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidPayload("the body is not UTF-8") from None
    except (ValueError, RecursionError):  # JSONDecodeError, or an integer beyond int_max_str_digits
        raise InvalidPayload("the body is not JSON") from None


def _header(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name)
    if value is None:
        raise MissingHeader(f"the '{name}' header is missing")
    return value


def _parse_timestamp(raw: str, where: str) -> int:
    """Strict integer seconds: ASCII digits only (no sign, space, dot, underscore or exponent)."""
    if not (0 < len(raw) <= _MAX_TIMESTAMP_DIGITS and raw.isascii() and raw.isdigit()):
        raise MalformedHeader(f"{where} must be integer Unix seconds")
    return int(raw)


def _check_event_id(event_id: str, where: str) -> str:
    if not (
        0 < len(event_id) <= MAX_EVENT_ID_LENGTH
        and event_id.isascii()
        and event_id.isprintable()
        and " " not in event_id
    ):
        raise MalformedHeader(
            f"the event id in {where} must be 1-{MAX_EVENT_ID_LENGTH} visible ASCII characters"
        )
    return event_id


def _check_window(timestamp: int, now: float, tolerance: int) -> None:
    now_s = math.floor(now)
    if timestamp < now_s - tolerance:
        raise TimestampTooOld(f"the signed timestamp is more than {tolerance} s in the past")
    if timestamp > now_s + tolerance:
        raise TimestampTooNew(f"the signed timestamp is more than {tolerance} s in the future")


def _hex_candidates(values: Iterable[str]) -> list[bytes]:
    found = []
    for value in values:
        try:
            found.append(bytes.fromhex(value))
        except ValueError:
            continue
    return found


def _match(keys: Sequence[bytes], head: bytes, body: bytes, candidates: Sequence[bytes]) -> int:
    """The index of the first key whose HMAC of ``head + body`` equals a candidate, compared in
    constant time."""
    for index, key in enumerate(keys):
        expected = _hmac_sha256(key, head, body)
        for candidate in candidates:
            if _compare(expected, candidate):
                return index
    raise SignatureMismatch("no signature matches an active secret")


class Scheme(Protocol):
    """One wire scheme: how a sender signs a body and how a receiver checks it."""

    @property
    def name(self) -> str:
        """The scheme's name: ``standard``, ``stripe`` or ``github``."""
        ...

    @property
    def uses_timestamp(self) -> bool:
        """Whether the scheme signs a timestamp (and so checks a tolerance window)."""
        ...

    def key(self, secret: Secret) -> bytes:
        """The HMAC key this scheme derives from a configured secret."""
        ...

    def sign(
        self, body: bytes, *, secrets: Sequence[Secret], event_id: str, timestamp: int
    ) -> dict[str, str]:
        """The headers that authenticate ``body`` (one signature per secret)."""
        ...

    def verify(
        self,
        body: bytes,
        headers: Mapping[str, str],
        *,
        keys: Sequence[bytes],
        now: float,
        tolerance: int,
    ) -> VerifiedMessage:
        """Check ``body`` against ``headers`` (lower-cased names) or raise a VerificationError."""
        ...


def _standard_candidates(header: str) -> list[bytes]:
    """The decoded ``v1`` signatures of a ``webhook-signature`` header; other versions ignored."""
    candidates: list[bytes] = []
    well_formed = 0
    for entry in header.split():
        version, comma, encoded = entry.partition(",")
        if not comma or not version or not encoded:
            continue
        well_formed += 1
        if version != "v1":
            continue  # unknown versions are ignored, never an error by themselves
        try:
            candidates.append(_a2b_base64(encoded, strict_mode=True))
        except (binascii.Error, ValueError):
            continue
    if not well_formed:
        raise MalformedHeader(
            "the 'webhook-signature' header must hold space-separated 'v1,<base64>' entries"
        )
    return candidates


def _verify_standard(
    body: bytes, headers: Mapping[str, str], keys: Sequence[bytes], now: float, tolerance: int
) -> VerifiedMessage:
    """:meth:`StandardWebhooks.verify`, positional (``Verifier`` calls it directly)."""
    # The hot path of every delivery, kept flat on purpose (see bench/bench_verify.py): no
    # helper calls on success except the constant-time compare; helpers only to raise.
    try:
        event_id = headers["webhook-id"]
        raw_ts = headers["webhook-timestamp"]
        header = headers["webhook-signature"]
    except KeyError:
        names = ("webhook-id", "webhook-timestamp", "webhook-signature")
        missing = [name for name in names if headers.get(name) is None] or ["webhook-id"]
        raise MissingHeader(f"the '{missing[0]}' header is missing") from None
    line = f"{event_id}.{raw_ts}."  # what is signed before the body
    if not (
        0 < len(event_id) <= MAX_EVENT_ID_LENGTH
        and 0 < len(raw_ts) <= _MAX_TIMESTAMP_DIGITS
        and line.isascii()
        and raw_ts.isdigit()
        and event_id.isprintable()
        and " " not in event_id
    ):
        _check_event_id(event_id, "'webhook-id'")  # one of these two raises
        _parse_timestamp(raw_ts, "the 'webhook-timestamp' header")
    candidates: list[bytes]
    if len(header) == 47 and header.startswith("v1,"):  # the usual: one v1 HMAC-SHA256
        try:
            candidates = [_a2b_base64(header[3:], strict_mode=True)]
        except (binascii.Error, ValueError):
            candidates = []
    elif len(header) > _MAX_SIGNATURE_HEADER:
        raise MalformedHeader("the 'webhook-signature' header is too long")
    else:
        candidates = _standard_candidates(header)
    timestamp = int(raw_ts)
    # floor(now) - tolerance <= timestamp <= floor(now) + tolerance, for an integer timestamp:
    if not now - tolerance - 1 < timestamp <= now + tolerance:
        _check_window(timestamp, now, tolerance)
    head = line.encode("ascii")
    for index, key in enumerate(keys):
        inner_state, outer_state = _prepared.get(key) or _prepare(key)
        inner = inner_state.copy()
        inner.update(head)
        inner.update(body)
        outer = outer_state.copy()
        outer.update(inner.digest())
        expected = outer.digest()
        for candidate in candidates:
            if _compare(expected, candidate):
                message = _new_object(VerifiedMessage)  # = _verified(...), inlined
                fields = message.__dict__
                fields["event_id"] = event_id
                fields["body"] = body
                fields["scheme"] = "standard"
                fields["timestamp"] = timestamp
                fields["secret_index"] = index
                return message
    raise SignatureMismatch("no signature matches an active secret")


@dataclass(frozen=True)
class StandardWebhooks:
    """Standard Webhooks v1, byte-compatible with the public specification and its libraries."""

    name: ClassVar[str] = "standard"
    uses_timestamp: ClassVar[bool] = True
    id_header: ClassVar[str] = "webhook-id"
    timestamp_header: ClassVar[str] = "webhook-timestamp"
    signature_header: ClassVar[str] = "webhook-signature"

    def key(self, secret: Secret) -> bytes:
        return secret.standard_key()

    def sign(
        self, body: bytes, *, secrets: Sequence[Secret], event_id: str, timestamp: int
    ) -> dict[str, str]:
        signed = b"%s.%d.%s" % (event_id.encode("utf-8"), timestamp, body)
        signatures = " ".join(
            "v1," + base64.b64encode(_hmac_digest(s.standard_key(), signed, "sha256")).decode()
            for s in secrets
        )
        return {
            self.id_header: event_id,
            self.timestamp_header: str(timestamp),
            self.signature_header: signatures,
        }

    def verify(
        self,
        body: bytes,
        headers: Mapping[str, str],
        *,
        keys: Sequence[bytes],
        now: float,
        tolerance: int,
    ) -> VerifiedMessage:
        return _verify_standard(body, headers, keys, now, tolerance)


@dataclass(frozen=True)
class StripeStyle:
    """``Stripe-Signature: t=<ts>,v1=<hex>[,v1=<hex>…]`` over ``"{t}.{body}"``; id from the body."""

    name: ClassVar[str] = "stripe"
    uses_timestamp: ClassVar[bool] = True
    signature_header: ClassVar[str] = "stripe-signature"

    def key(self, secret: Secret) -> bytes:
        return secret.raw_key()

    def sign(
        self, body: bytes, *, secrets: Sequence[Secret], event_id: str, timestamp: int
    ) -> dict[str, str]:
        signed = b"%d.%s" % (timestamp, body)
        parts = [f"t={timestamp}"] + [
            "v1=" + _hmac_digest(s.raw_key(), signed, "sha256").hex() for s in secrets
        ]
        return {self.signature_header: ",".join(parts)}

    def verify(
        self,
        body: bytes,
        headers: Mapping[str, str],
        *,
        keys: Sequence[bytes],
        now: float,
        tolerance: int,
    ) -> VerifiedMessage:
        header = _header(headers, self.signature_header)
        if len(header) > _MAX_SIGNATURE_HEADER:
            raise MalformedHeader("the 'stripe-signature' header is too long")
        pairs = [item.partition("=") for item in header.split(",")]
        raw_ts = [value for name, eq, value in pairs if eq and name == "t"]
        if len(raw_ts) != 1:
            raise MalformedHeader("the 'stripe-signature' header must hold exactly one 't='")
        timestamp = _parse_timestamp(raw_ts[0], "the 't=' of the 'stripe-signature' header")
        candidates = _hex_candidates(v for n, eq, v in pairs if eq and n == "v1")
        _check_window(timestamp, now, tolerance)
        index = _match(keys, f"{raw_ts[0]}.".encode("ascii"), body, candidates)
        event_id = _body_event_id(body)
        return _verified(event_id, body, self.name, timestamp, index)


def _body_event_id(body: bytes) -> str:
    document = _parse_json(body)
    event_id = document.get("id") if isinstance(document, dict) else None
    if not isinstance(event_id, str):
        raise InvalidPayload("the body must be a JSON object with a string 'id'")
    try:
        return _check_event_id(event_id, "the body's 'id'")
    except MalformedHeader as error:
        raise InvalidPayload(str(error)) from None


@dataclass(frozen=True)
class GitHubStyle:
    """``X-Hub-Signature-256: sha256=<hex>`` over the body; the id is ``X-GitHub-Delivery``."""

    name: ClassVar[str] = "github"
    uses_timestamp: ClassVar[bool] = False
    signature_header: ClassVar[str] = "x-hub-signature-256"
    id_header: ClassVar[str] = "x-github-delivery"

    def key(self, secret: Secret) -> bytes:
        return secret.raw_key()

    def sign(
        self, body: bytes, *, secrets: Sequence[Secret], event_id: str, timestamp: int
    ) -> dict[str, str]:
        digest = _hmac_digest(secrets[0].raw_key(), body, "sha256").hex()
        return {self.signature_header: f"sha256={digest}", self.id_header: event_id}

    def verify(
        self,
        body: bytes,
        headers: Mapping[str, str],
        *,
        keys: Sequence[bytes],
        now: float,
        tolerance: int,
    ) -> VerifiedMessage:
        event_id = _check_event_id(_header(headers, self.id_header), "'x-github-delivery'")
        header = _header(headers, self.signature_header)
        algorithm, eq, digest = header.partition("=")
        if not eq or algorithm != "sha256" or len(digest) != 64:
            raise MalformedHeader("the 'x-hub-signature-256' header must be 'sha256=<64 hex>'")
        candidates = _hex_candidates([digest])
        if not candidates:
            raise MalformedHeader("the 'x-hub-signature-256' header must be 'sha256=<64 hex>'")
        index = _match(keys, b"", body, candidates)
        return _verified(event_id, body, self.name, None, index)


SCHEMES: Mapping[str, Scheme] = {
    scheme.name: scheme for scheme in (StandardWebhooks(), StripeStyle(), GitHubStyle())
}


def scheme_named(name: str) -> Scheme:
    """The scheme called ``name`` (``standard``, ``stripe`` or ``github``)."""
    try:
        return SCHEMES[name]
    except KeyError:
        choices = ", ".join(SCHEMES)
        raise ConfigurationError(f"unknown scheme {name!r}; choose one of {choices}") from None


@dataclass(frozen=True)
class Verifier:
    """Verifies deliveries for one scheme against several active secrets (rotation).

    Keys are derived once, at construction; a bad secret is a :class:`ConfigurationError` here,
    not a failure per request. ``clock`` returns Unix seconds and is read at each call.
    """

    secrets: Sequence[Secret]
    scheme: Scheme = field(default_factory=StandardWebhooks)
    tolerance: int = DEFAULT_TOLERANCE_S
    clock: Callable[[], float] = time.time
    _keys: tuple[bytes, ...] = field(init=False, repr=False, compare=False)
    _direct: Callable[..., VerifiedMessage] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.secrets:
            raise ConfigurationError("at least one webhook secret is required")
        if isinstance(self.tolerance, bool) or not isinstance(self.tolerance, int):
            raise ConfigurationError("the tolerance must be a whole number of seconds")
        if self.tolerance < 0:
            raise ConfigurationError("the tolerance must not be negative")
        object.__setattr__(self, "_keys", tuple(self.scheme.key(s) for s in self.secrets))
        # The default scheme's verify is called directly: one call and no keywords fewer per
        # delivery (bench/bench_verify.py).
        direct = _verify_standard if type(self.scheme) is StandardWebhooks else None
        object.__setattr__(self, "_direct", direct)

    def verify(
        self, body: bytes, headers: Mapping[str, str], now: float | None = None
    ) -> VerifiedMessage:
        """Check one delivery. ``headers`` may use any case; ``now`` defaults to the clock."""
        if now is None:
            now = self.clock()
        direct = self._direct
        try:
            if direct is not None:
                return direct(body, headers, self._keys, now, self.tolerance)
            return self.scheme.verify(
                body, headers, keys=self._keys, now=now, tolerance=self.tolerance
            )
        except MissingHeader:
            # Schemes look names up in lower case; only a mapping with other cases needs a copy.
            if _is_lower(headers):
                raise
        lowered = {name.lower(): value for name, value in headers.items()}
        return self.scheme.verify(body, lowered, keys=self._keys, now=now, tolerance=self.tolerance)

    def sign(self, body: bytes, *, event_id: str, timestamp: int) -> dict[str, str]:
        """Headers that this verifier accepts for ``body`` (handy in tests and tools)."""
        return self.scheme.sign(body, secrets=self.secrets, event_id=event_id, timestamp=timestamp)


def _is_lower(headers: Mapping[str, str]) -> bool:
    return all(map(str.islower, headers))  # map: no generator frame on the hot path
