"""What every wire scheme shares: secrets, the verified message, strict parsing, the HMAC core,
and :class:`Scheme`, the one interface each scheme object implements.

A scheme object owns everything about its scheme: the signed content and the headers that carry
it, the other headers its platform sends with every delivery, signing and verifying, where the
event id lives, its secrets (minting, parsing, fingerprints), decoy signatures for tests, the
redaction of its secrets and signatures from text, and what a conformance runner needs to break
a delivery on purpose (its roles, dropping one, the valid signature among decoys, the broken
shapes of its header grammar, a garbled signature), so no caller branches on a scheme's name.
:class:`SchemeBase` gives the parts most schemes share; each scheme's module overrides what
differs (``standard.py``, ``stripe.py``, ``github.py``); ``registry.py`` names them.

Every failure is a :class:`~receiver.exceptions.VerificationError` (or a
:class:`~receiver.exceptions.ConfigurationError` for an unusable secret); no ``ValueError``,
``binascii.Error`` or ``UnicodeDecodeError`` escapes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import os
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, NamedTuple, Protocol

from receiver.exceptions import (
    ConfigurationError,
    InvalidPayload,
    MalformedHeader,
    MissingHeader,
    SignatureMismatch,
    TimestampTooNew,
    TimestampTooOld,
)
from receiver.ijson import ParsedPayload

__all__ = [
    "DEFAULT_TOLERANCE_S",
    "MAX_EVENT_ID_LENGTH",
    "ROLES",
    "BrokenHeader",
    "Scheme",
    "SchemeBase",
    "Secret",
    "VerifiedMessage",
    "fingerprint",
    "is_event_id",
    "standard_key",
]

DEFAULT_TOLERANCE_S = 300
MAX_EVENT_ID_LENGTH = 255
SECRET_BYTES = 24
"""How many random bytes a freshly minted secret carries."""
MAX_TIMESTAMP_DIGITS = 12
MAX_SIGNATURE_HEADER = 4096
hmac_digest = hmac.digest
compare = hmac.compare_digest
a2b_base64 = binascii.a2b_base64
_sha256 = hashlib.sha256
_BLOCK = 64  # SHA-256's block size
_TRANS_36 = bytes(x ^ 0x36 for x in range(256))
_TRANS_5C = bytes(x ^ 0x5C for x in range(256))
_PREPARED_LIMIT = 256
prepared: dict[bytes, tuple[Any, Any]] = {}
"""HMAC-SHA256 states per key, already keyed (see :func:`prepare`)."""


def prepare(key: bytes) -> tuple[Any, Any]:
    """HMAC-SHA256 (RFC 2104) with the key already absorbed: the inner and outer hash states.

    Copying two prepared states per message is about twice as fast as ``hmac.digest``, which
    sets the key up again on every call; the verify hot path is mostly that set-up.
    """
    found = prepared.get(key)
    if found is None:
        block = (_sha256(key).digest() if len(key) > _BLOCK else key).ljust(_BLOCK, b"\0")
        found = (_sha256(block.translate(_TRANS_36)), _sha256(block.translate(_TRANS_5C)))
        if len(prepared) >= _PREPARED_LIMIT:
            prepared.clear()
        prepared[key] = found
    return found


def hmac_sha256(key: bytes, head: bytes, body: bytes) -> bytes:
    """``HMAC-SHA256(key, head + body)`` without concatenating ``head`` and ``body``."""
    inner_state, outer_state = prepare(key)
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
        return standard_key(self.value)

    def raw_key(self) -> bytes:
        """The HMAC key of the Stripe- and GitHub-style schemes: the string's own bytes."""
        return self.value.encode("utf-8")


def standard_key(value: str) -> bytes:
    """The HMAC key of a Standard Webhooks secret: the base64 after an optional ``whsec_``."""
    encoded = value.removeprefix("whsec_")
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


def random_bytes(rng: random.Random, size: int) -> bytes:
    """``size`` bytes drawn from ``rng`` (one ``getrandbits(8)`` each, so seeded runs repeat)."""
    return bytes(rng.getrandbits(8) for _ in range(size))


def without(headers: Mapping[str, str], name: str) -> dict[str, str]:
    """``headers`` without ``name``."""
    return {k: v for k, v in headers.items() if k != name}


def placed(valid: str, decoys: Sequence[str], position: str) -> list[str]:
    """``valid`` put ``first``, ``middle`` (after the first decoy) or ``last`` among ``decoys``."""
    index = {"first": 0, "middle": 1, "last": len(decoys)}[position]
    return [*decoys[:index], valid, *decoys[index:]]


NON_ASCII_DIGITS = "١٢٣".encode()
"""Digits Python's ``int()`` accepts but no signed text matches (fuzzing timestamps)."""

ROLES: tuple[str, ...] = ("id", "timestamp", "signature")
"""What a signed delivery carries, by role: the event id, the signed timestamp, the signature."""

# A token starts only where a name starts (the look-behind): otherwise a long run of name
# characters with no separator is rescanned from every position, quadratic in its length.
_SIGNATURE_TOKEN = re.compile(r"(?<![A-Za-z0-9_-])(?P<name>[A-Za-z0-9_-]+)[,=](?P<value>[^\s,]+)")


@dataclass(frozen=True)
class BrokenHeader:
    """The ways one of a scheme's headers is broken by its own grammar (for fuzzing).

    ``role`` is what the header carries (one of :data:`ROLES`), so a fuzz driver can add the
    junk every header of that role gets; ``values`` are the scheme's own broken shapes."""

    name: str
    role: str
    values: tuple[bytes, ...] = ()


def fingerprint(secrets: Sequence[Secret]) -> str:
    """A short, stable, non-reversible name for a set of secrets (stored instead of them)."""
    digest = hashlib.sha256("\n".join(s.value for s in secrets).encode()).hexdigest()
    return "sha256:" + digest[:16]


class VerifiedMessage(NamedTuple):
    """A delivery whose signature and timestamp were checked; ``body`` is the bytes signed.

    A named tuple, not a frozen dataclass: every delivery builds one on the verify hot path, and
    a tuple is built in one call (a frozen dataclass pays one ``object.__setattr__`` per field).
    It is immutable, compares by value and reads by name; ``payload`` is left out of ``repr``.
    """

    event_id: str
    body: bytes
    scheme: str
    timestamp: int | None = None
    secret_index: int = 0
    payload: ParsedPayload | None = None
    """The body as the scheme already parsed it to verify it (the Stripe-style id), else
    ``None``: the middleware's I-JSON check reuses it instead of parsing again."""

    def json(self) -> Any:
        """The body parsed as JSON, or :class:`InvalidPayload`."""
        if self.payload is not None:
            return self.payload.document
        return parse_json(self.body)

    def __hash__(self) -> int:
        return hash(self[:5])  # the parse may hold a dict (unhashable): the fields decide

    def __repr__(self) -> str:
        return (
            f"VerifiedMessage(event_id={self.event_id!r}, body={self.body!r}, "
            f"scheme={self.scheme!r}, timestamp={self.timestamp!r}, "
            f"secret_index={self.secret_index!r})"
        )


new_tuple: Final = tuple.__new__
"""``tuple.__new__``: builds a :class:`VerifiedMessage` from its fields without the generated
``__new__``'s keyword handling (the verify hot path calls it directly)."""


def verified(
    event_id: str,
    body: bytes,
    scheme: str,
    timestamp: int | None,
    secret_index: int,
    payload: ParsedPayload | None = None,
) -> VerifiedMessage:
    """``VerifiedMessage(...)``, positional and at about half the cost."""
    return new_tuple(VerifiedMessage, (event_id, body, scheme, timestamp, secret_index, payload))


def parse_json(body: bytes) -> Any:
    if not body:
        raise InvalidPayload("the body is empty")
    try:
        return json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidPayload("the body is not UTF-8") from None
    except (ValueError, RecursionError):  # JSONDecodeError, or an integer beyond int_max_str_digits
        raise InvalidPayload("the body is not JSON") from None


def header(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name)
    if value is None:
        raise MissingHeader(f"the '{name}' header is missing")
    return value


def parse_timestamp(raw: str, where: str) -> int:
    """Strict integer seconds: ASCII digits only (no sign, space, dot, underscore or exponent)."""
    if not (0 < len(raw) <= MAX_TIMESTAMP_DIGITS and raw.isascii() and raw.isdigit()):
        raise MalformedHeader(f"{where} must be integer Unix seconds")
    return int(raw)


def is_event_id(event_id: str) -> bool:
    """Whether ``event_id`` is one a delivery may carry: 1 to :data:`MAX_EVENT_ID_LENGTH`
    visible ASCII characters (no space, no control character). No other id is ever stored."""
    return (
        0 < len(event_id) <= MAX_EVENT_ID_LENGTH
        and event_id.isascii()
        and event_id.isprintable()
        and " " not in event_id
    )


def check_event_id(event_id: str, where: str) -> str:
    if not is_event_id(event_id):
        raise MalformedHeader(
            f"the event id in {where} must be 1-{MAX_EVENT_ID_LENGTH} visible ASCII characters"
        )
    return event_id


def check_window(timestamp: int, now: float, tolerance: int) -> None:
    now_s = math.floor(now)
    if timestamp < now_s - tolerance:
        raise TimestampTooOld(f"the signed timestamp is more than {tolerance} s in the past")
    if timestamp > now_s + tolerance:
        raise TimestampTooNew(f"the signed timestamp is more than {tolerance} s in the future")


def hex_candidates(values: Iterable[str]) -> list[bytes]:
    found = []
    for value in values:
        try:
            found.append(bytes.fromhex(value))
        except ValueError:
            continue
    return found


def match(keys: Sequence[bytes], head: bytes, body: bytes, candidates: Sequence[bytes]) -> int:
    """The index of the first key whose HMAC of ``head + body`` equals a candidate, compared in
    constant time."""
    for index, key in enumerate(keys):
        expected = hmac_sha256(key, head, body)
        for candidate in candidates:
            if compare(expected, candidate):
                return index
    raise SignatureMismatch("no signature matches an active secret")


class Scheme(Protocol):
    """One wire scheme: how a sender signs a body, how a receiver checks it, and everything
    else that depends on the scheme (event id, secrets, decoys, redaction)."""

    @property
    def name(self) -> str:
        """The scheme's name: ``standard``, ``stripe`` or ``github``."""
        ...

    @property
    def uses_timestamp(self) -> bool:
        """Whether the scheme signs a timestamp (and so checks a tolerance window)."""
        ...

    @property
    def signature_header(self) -> str:
        """The (lower-case) header that carries the signature."""
        ...

    @property
    def header_names(self) -> frozenset[str]:
        """The (lower-case) headers its deliveries are signed with: id, timestamp, signature."""
        ...

    @property
    def delivery_headers(self) -> tuple[tuple[str, str], ...]:
        """The other headers the platform sends with every delivery, lower-case names in
        order: its content type (Stripe's carries ``charset=utf-8``) and what receivers built
        on its libraries require (GitHub's ``X-GitHub-Event``: Octokit refuses a delivery
        without it)."""
        ...

    @property
    def redaction_pattern(self) -> re.Pattern[str]:
        """Text shaped like this scheme's signatures or secrets (see :meth:`redact`)."""
        ...

    def key(self, secret: Secret) -> bytes:
        """The HMAC key this scheme derives from a configured secret."""
        ...

    def signed_content(self, body: bytes, *, event_id: str, timestamp: int) -> bytes:
        """The exact bytes the HMAC covers."""
        ...

    def digest(self, body: bytes, *, secret: Secret, event_id: str, timestamp: int) -> bytes:
        """The HMAC-SHA256 that signs ``body`` under ``secret`` (before any encoding)."""
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

    def event_id(self, headers: Mapping[str, str], body: bytes) -> str:
        """Where this scheme carries the event id, read leniently: ``""`` when absent."""
        ...

    def mint_secret(self, raw: bytes | None = None) -> Secret:
        """A fresh secret of this scheme's usual shape (``raw``: its random bytes, for seeds)."""
        ...

    def parse_secret(self, value: str) -> Secret:
        """``value`` as a secret this scheme can use, or :class:`ConfigurationError`."""
        ...

    def fingerprint(self, secrets: Sequence[Secret]) -> str:
        """A short, stable, non-reversible name for ``secrets``."""
        ...

    def secret_texts(self, secrets: Iterable[Secret]) -> list[str]:
        """Every text derived from ``secrets`` that must never appear in a log or sample."""
        ...

    def decoy(
        self,
        headers: Mapping[str, str],
        *,
        kind: str,
        body: bytes,
        event_id: str,
        timestamp: int,
        key: bytes,
    ) -> dict[str, str]:
        """``headers`` with a signature the receiver must skip put before the valid one:
        ``rotation`` (signed with ``key``, another secret) or ``unknown-version`` (a version it
        does not know). :class:`ConfigurationError` for a scheme carrying one signature only."""
        ...

    def redact(self, text: str, replacement: str = "***") -> str:
        """``text`` with anything shaped like this scheme's signatures or secrets replaced."""
        ...

    # What tests and the conformance runner need to build deliveries a receiver must refuse or
    # skip; the scheme's knowledge, so the runner never branches on a scheme's name.

    @property
    def id_in_body(self) -> bool:
        """Whether the event id lives in the body (else in a header)."""
        ...

    @property
    def several_signatures(self) -> bool:
        """Whether a delivery may carry several signatures (rotation, unknown versions)."""
        ...

    @property
    def case_sensitive_ids(self) -> bool:
        """Whether two event ids that differ only in letter case are two events."""
        ...

    @property
    def case_sensitive_signatures(self) -> bool:
        """Whether a signature's text changes its bytes when a letter changes case (base64
        does; hex does not)."""
        ...

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles of :data:`ROLES` a delivery of this scheme carries, in that order."""
        ...

    @property
    def unsigned_headers(self) -> frozenset[str]:
        """Headers the signature does not cover (breaking them leaves the signature valid)."""
        ...

    @property
    def garbled_signature(self) -> str:
        """A signature header value no parser can read."""
        ...

    def timestamp_of(self, headers: Mapping[str, str]) -> int | None:
        """The signed timestamp a delivery carries, read leniently: ``None`` when absent or not
        integer seconds (or when the scheme signs none)."""
        ...

    def signature_values(self, headers: Mapping[str, str]) -> list[str]:
        """The secret-derived values in the signature header (to scrub from echoed text)."""
        ...

    @property
    def companion_headers(self) -> frozenset[str]:
        """Signature headers the platform sends beside its own, derived from the same secret
        and body (GitHub's legacy ``x-hub-signature``): part of every genuine delivery, never
        one of the scheme's own headers (not verified here, not fuzzed)."""
        ...

    def agreeing(
        self, headers: Sequence[tuple[str, bytes]], body: bytes, *, keys: Sequence[bytes]
    ) -> tuple[tuple[str, bytes], ...]:
        """``headers`` (wire order, any name case) without a companion signature the platform
        sends beside its own (GitHub's legacy ``X-Hub-Signature``) unless the scheme's own
        signature header is the genuine one of ``body`` under one of ``keys``: a request whose
        signature was broken on purpose must not stay authentic through its companion."""
        ...

    def signature_with(self, digest: bytes, *, timestamp: int) -> str:
        """A well-formed signature header value carrying ``digest`` as its one signature of the
        current version (whatever its length: for wrong-length cases)."""
        ...

    def listed(
        self,
        headers: Mapping[str, str],
        *,
        position: str,
        body: bytes,
        event_id: str,
        timestamp: int,
        key: bytes,
        unknown: bytes,
    ) -> dict[str, str]:
        """``headers`` with the valid signature ``first``, ``middle`` or ``last`` among two the
        receiver must skip: one of the current version signed with ``key`` (another secret's)
        and ``unknown`` as the digest of a version it does not know.
        :class:`ConfigurationError` for a scheme carrying one signature only."""
        ...

    def drop(
        self, role: str, headers: Mapping[str, str], body: bytes, *, secrets: Sequence[Secret]
    ) -> tuple[dict[str, str], bytes]:
        """The delivery without ``role`` (``id``, ``timestamp``, ``signature``), signed again
        with ``secrets`` when removing the role changes the signed content (Stripe's id lives in
        the body). :class:`ConfigurationError` when the scheme has no such role."""
        ...

    def broken_headers(self, *, timestamp: int, rng: random.Random) -> tuple[BrokenHeader, ...]:
        """Each of the scheme's headers with the broken shapes of its grammar, in a fixed order
        (random parts drawn from ``rng``, so a seed repeats them); a fuzz driver adds the junk
        common to each role."""
        ...

    def secret_warning(self, value: str) -> str | None:
        """Why ``value`` looks like a secret meant for another scheme (the end of a sentence
        that starts with the secret's name), or ``None`` when it looks like this scheme's."""
        ...

    @property
    def clear_fields(self) -> frozenset[str]:
        """Fields of the signature header not derived from the secret (Stripe's ``t``, and the
        masked ``secret=`` description): shown where signatures are redacted."""
        ...

    @property
    def describes_secret(self) -> bool:
        """Whether the scheme's sender may describe, in the signature header, the secret it
        signed with (Stripe's masked ``secret=`` item)."""
        ...

    def with_secret_hint(self, headers: Mapping[str, str], *, secret: Secret) -> dict[str, str]:
        """``headers`` describing ``secret`` the way the scheme's sender does: masked but for
        its length and last four characters (Stripe's libraries compare that with the secret
        they hold, and stripe-node names the length and last four characters of theirs in its
        error message). :class:`ConfigurationError` for a scheme whose sender never does."""
        ...


class SchemeBase:
    """The parts of :class:`Scheme` most schemes share; a scheme sets the class attributes and
    overrides what differs. The HMAC key is the secret string's own bytes unless overridden."""

    name: ClassVar[str]
    uses_timestamp: ClassVar[bool]
    signature_header: ClassVar[str]
    delivery_headers: ClassVar[tuple[tuple[str, str], ...]] = (
        ("content-type", "application/json"),
    )
    id_header: ClassVar[str | None] = None
    """The header that carries the event id (``None``: it lives elsewhere)."""
    timestamp_header: ClassVar[str | None] = None
    """The header that carries the signed timestamp on its own (``None``: none or elsewhere)."""
    id_in_body: ClassVar[bool] = False
    case_sensitive_ids: ClassVar[bool] = True
    """Whether two event ids that differ only in letter case are two events (GitHub's delivery
    id is a GUID: hex, which no one is wrong to compare case-insensitively)."""
    several_signatures: ClassVar[bool] = False
    describes_secret: ClassVar[bool] = False
    case_sensitive_signatures: ClassVar[bool] = False
    """Whether a signature's text changes its bytes when a letter changes case: hex (the
    default) does not, so a receiver may compare it either way; base64 does."""
    unsigned_headers: ClassVar[frozenset[str]] = frozenset()
    companion_headers: ClassVar[frozenset[str]] = frozenset()
    clear_fields: ClassVar[frozenset[str]] = frozenset()
    """Fields of the signature header not derived from the secret (Stripe's ``t``)."""
    garbled_signature: ClassVar[str]
    secret_prefix: ClassVar[str] = ""
    """What a minted secret starts with."""
    redaction_pattern: ClassVar[re.Pattern[str]]
    """Text shaped like this scheme's signatures or secrets."""

    @property
    def header_names(self) -> frozenset[str]:
        named = (self.id_header, self.timestamp_header, self.signature_header)
        return frozenset(name for name in named if name is not None)

    def key(self, secret: Secret) -> bytes:
        return secret.raw_key()

    def signed_content(self, body: bytes, *, event_id: str, timestamp: int) -> bytes:
        raise NotImplementedError  # each scheme says what its HMAC covers

    def digest(self, body: bytes, *, secret: Secret, event_id: str, timestamp: int) -> bytes:
        content = self.signed_content(body, event_id=event_id, timestamp=timestamp)
        return hmac_sha256(self.key(secret), b"", content)

    def event_id(self, headers: Mapping[str, str], body: bytes) -> str:
        if self.id_header is None:
            return ""
        return headers.get(self.id_header) or ""

    def mint_secret(self, raw: bytes | None = None) -> Secret:
        material = os.urandom(SECRET_BYTES) if raw is None else raw
        return Secret(self.secret_prefix + material.hex())

    def parse_secret(self, value: str) -> Secret:
        secret = Secret(value)
        self.key(secret)  # raises ConfigurationError when unusable for this scheme
        return secret

    def fingerprint(self, secrets: Sequence[Secret]) -> str:
        return fingerprint(secrets)

    def secret_texts(self, secrets: Iterable[Secret]) -> list[str]:
        values = [s.value for s in secrets]
        return values + [value.removeprefix("whsec_") for value in values]

    def decoy(
        self,
        headers: Mapping[str, str],
        *,
        kind: str,
        body: bytes,
        event_id: str,
        timestamp: int,
        key: bytes,
    ) -> dict[str, str]:
        raise ConfigurationError(f"the {self.name} scheme carries a single signature")

    def redact(self, text: str, replacement: str = "***") -> str:
        return self.redaction_pattern.sub(replacement, text)

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(role for role in ROLES if role != "timestamp" or self.uses_timestamp)

    def timestamp_of(self, headers: Mapping[str, str]) -> int | None:
        raw = headers.get(self.timestamp_header) if self.timestamp_header else None
        return int(raw) if raw and raw.isascii() and raw.isdigit() else None

    def agreeing(
        self, headers: Sequence[tuple[str, bytes]], body: bytes, *, keys: Sequence[bytes]
    ) -> tuple[tuple[str, bytes], ...]:
        return tuple(headers)  # a scheme without companion signatures sends its own alone

    def signature_values(self, headers: Mapping[str, str]) -> list[str]:
        raw = headers.get(self.signature_header, "")
        return [
            found["value"]
            for found in _SIGNATURE_TOKEN.finditer(raw)
            if found["name"] not in self.clear_fields and len(found["value"]) > 8
        ]

    def listed(
        self,
        headers: Mapping[str, str],
        *,
        position: str,
        body: bytes,
        event_id: str,
        timestamp: int,
        key: bytes,
        unknown: bytes,
    ) -> dict[str, str]:
        raise ConfigurationError(f"the {self.name} scheme carries a single signature")

    def drop(
        self, role: str, headers: Mapping[str, str], body: bytes, *, secrets: Sequence[Secret]
    ) -> tuple[dict[str, str], bytes]:
        where = {
            "id": self.id_header,
            "timestamp": self.timestamp_header,
            "signature": self.signature_header,
        }.get(role)
        if where is None:
            raise ConfigurationError(f"the {self.name} scheme has no {role} to drop")
        return without(headers, where), body

    def secret_warning(self, value: str) -> str | None:
        return None

    def with_secret_hint(self, headers: Mapping[str, str], *, secret: Secret) -> dict[str, str]:
        raise ConfigurationError(f"the {self.name} scheme never describes its secret")
