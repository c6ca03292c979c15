"""Standard Webhooks v1 (the default scheme), byte-compatible with the public specification,
and Svix's branding of it.

``webhook-id``, ``webhook-timestamp`` and ``webhook-signature: v1,<base64 HMAC-SHA256 of
"{id}.{timestamp}.{body}">``; ``whsec_<base64>`` secrets; several space-separated signatures;
unknown versions ignored. The ``svix`` scheme is the same with ``svix-id``, ``svix-timestamp`` and
``svix-signature``: what Svix sends unless an account has the headers white-labelled, and what
receivers written from Svix's manual-verification docs (or Clerk's, Resend's …) read. Its verify
is the hot path of every delivery and is kept flat on purpose (see ``bench/bench_verify.py``).
"""

from __future__ import annotations

import base64
import binascii
import os
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from receiver.exceptions import (
    ConfigurationError,
    MalformedHeader,
    MissingHeader,
    SignatureMismatch,
)
from receiver.schemes.base import (
    MAX_EVENT_ID_LENGTH,
    MAX_SIGNATURE_HEADER,
    MAX_TIMESTAMP_DIGITS,
    SECRET_BYTES,
    BrokenHeader,
    SchemeBase,
    Secret,
    VerifiedMessage,
    a2b_base64,
    check_event_id,
    check_window,
    compare,
    hmac_digest,
    new_tuple,
    parse_timestamp,
    placed,
    prepare,
    prepared,
    random_bytes,
    standard_key,
)

__all__ = ["StandardWebhooks", "SvixWebhooks", "verify_standard", "verify_svix"]

MIN_KEY_BYTES = SECRET_BYTES
"""The fewest key bytes a minted secret holds (Svix's and hookproof's hold 24): fewer is more
likely a secret cut short in a copy and paste than one a platform made."""

_a2b_base64 = a2b_base64
_compare = compare
_new_tuple = new_tuple
_prepared = prepared
_prepare = prepare


def _standard_candidates(header: str, name: str) -> list[bytes]:
    """The decoded ``v1`` signatures of a signature header (``name``); other versions ignored."""
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
            f"the '{name}' header must hold space-separated 'v1,<base64>' entries"
        )
    return candidates


Verify = Callable[[bytes, Mapping[str, str], Sequence[bytes], float, int], VerifiedMessage]


def _verifier(scheme: str, prefix: str) -> Verify:
    """The positional verify of the Standard Webhooks scheme whose headers are ``{prefix}id``,
    ``{prefix}timestamp`` and ``{prefix}signature`` (``Verifier`` calls it directly)."""
    id_name, ts_name, sig_name = f"{prefix}id", f"{prefix}timestamp", f"{prefix}signature"
    names = (id_name, ts_name, sig_name)
    where_id, where_ts = f"'{id_name}'", f"the '{ts_name}' header"
    too_long = f"the '{sig_name}' header is too long"

    def verify(
        body: bytes, headers: Mapping[str, str], keys: Sequence[bytes], now: float, tolerance: int
    ) -> VerifiedMessage:
        # The hot path of every delivery, kept flat on purpose (see bench/bench_verify.py): no
        # helper calls on success except the constant-time compare; helpers only to raise.
        try:
            event_id = headers[id_name]
            raw_ts = headers[ts_name]
            header = headers[sig_name]
        except KeyError:
            missing = [name for name in names if headers.get(name) is None] or [id_name]
            raise MissingHeader(f"the '{missing[0]}' header is missing") from None
        line = f"{event_id}.{raw_ts}."  # what is signed before the body
        if not (
            0 < len(event_id) <= MAX_EVENT_ID_LENGTH
            and 0 < len(raw_ts) <= MAX_TIMESTAMP_DIGITS
            and line.isascii()
            and raw_ts.isdigit()
            and event_id.isprintable()
            and " " not in event_id
        ):
            check_event_id(event_id, where_id)  # one of these two raises
            parse_timestamp(raw_ts, where_ts)
        candidates: list[bytes]
        if len(header) == 47 and header.startswith("v1,"):  # the usual: one v1 HMAC-SHA256
            try:
                candidates = [_a2b_base64(header[3:], strict_mode=True)]
            except (binascii.Error, ValueError):
                candidates = []
        elif len(header) > MAX_SIGNATURE_HEADER:
            raise MalformedHeader(too_long)
        else:
            candidates = _standard_candidates(header, sig_name)
        timestamp = int(raw_ts)
        # floor(now) - tolerance <= timestamp <= floor(now) + tolerance, for an integer timestamp:
        if not now - tolerance - 1 < timestamp <= now + tolerance:
            check_window(timestamp, now, tolerance)
        head = line.encode("ascii")
        index = 0
        for key in keys:
            inner_state, outer_state = _prepared.get(key) or _prepare(key)
            inner = inner_state.copy()
            inner.update(head)
            inner.update(body)
            outer = outer_state.copy()
            outer.update(inner.digest())
            expected = outer.digest()
            for candidate in candidates:
                if _compare(expected, candidate):
                    # = verified(...), inlined
                    return _new_tuple(
                        VerifiedMessage, (event_id, body, scheme, timestamp, index, None)
                    )
            index += 1  # noqa: SIM113 - enumerate() costs a tuple per key on the hot path
        raise SignatureMismatch("no signature matches an active secret")

    return verify


verify_standard = _verifier("standard", "webhook-")
"""Standard Webhooks' verify, positional."""
verify_svix = _verifier("svix", "svix-")
"""The svix scheme's verify, positional."""


@dataclass(frozen=True)
class StandardWebhooks(SchemeBase):
    """Standard Webhooks v1, byte-compatible with the public specification and its libraries."""

    name: ClassVar[str] = "standard"
    uses_timestamp: ClassVar[bool] = True
    id_header: ClassVar[str] = "webhook-id"
    timestamp_header: ClassVar[str] = "webhook-timestamp"
    signature_header: ClassVar[str] = "webhook-signature"
    several_signatures: ClassVar[bool] = True
    case_sensitive_signatures: ClassVar[bool] = True  # base64
    garbled_signature: ClassVar[str] = "v1,!!!"
    secret_prefix: ClassVar[str] = "whsec_"
    redaction_pattern: ClassVar[re.Pattern[str]] = re.compile(
        r"whsec_[A-Za-z0-9+/=]+|v1,[A-Za-z0-9+/=]{20,}"
    )

    @property
    def direct_verify(self) -> Verify:
        """Its verify, positional: what ``Verifier`` calls on the hot path."""
        return verify_standard

    def key(self, secret: Secret) -> bytes:
        return standard_key(secret.value)

    def signed_content(self, body: bytes, *, event_id: str, timestamp: int) -> bytes:
        return b"%s.%d.%s" % (event_id.encode("utf-8"), timestamp, body)

    def sign(
        self, body: bytes, *, secrets: Sequence[Secret], event_id: str, timestamp: int
    ) -> dict[str, str]:
        signed = self.signed_content(body, event_id=event_id, timestamp=timestamp)
        signatures = " ".join(
            "v1," + base64.b64encode(hmac_digest(standard_key(s.value), signed, "sha256")).decode()
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
        return self.direct_verify(body, headers, keys, now, tolerance)

    def mint_secret(self, raw: bytes | None = None) -> Secret:
        """``whsec_`` and the base64 of ``raw`` (24 fresh random bytes by default)."""
        material = os.urandom(SECRET_BYTES) if raw is None else raw
        return Secret(self.secret_prefix + base64.b64encode(material).decode("ascii"))

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
        version = "v1" if kind == "rotation" else "v2"
        signed = self.signed_content(body, event_id=event_id, timestamp=timestamp)
        bogus = base64.b64encode(hmac_digest(key, signed, "sha256")).decode()
        valid = headers[self.signature_header]
        return {**headers, self.signature_header: f"{version},{bogus} {valid}"}

    def signature_with(self, digest: bytes, *, timestamp: int) -> str:
        return "v1," + base64.b64encode(digest).decode()

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
        signed = self.signed_content(body, event_id=event_id, timestamp=timestamp)
        wrong = hmac_digest(key, signed, "sha256")
        decoys = [self.signature_with(wrong, timestamp=timestamp), f"v2,{_b64(unknown)}"]
        entries = placed(headers[self.signature_header], decoys, position)
        return {**headers, self.signature_header: " ".join(entries)}

    def broken_headers(self, *, timestamp: int, rng: random.Random) -> tuple[BrokenHeader, ...]:
        sig = _b64(random_bytes(rng, 32)).encode()
        return (
            BrokenHeader(self.id_header, "id"),
            BrokenHeader(self.timestamp_header, "timestamp"),
            BrokenHeader(
                self.signature_header,
                "signature",
                (
                    b"v1",
                    b"v1,",
                    b"v1,!!!",
                    b"v1,===",
                    b"v1 " + sig,
                    b"v1=" + sig,
                    b"v2," + sig,
                    b"v1," + random_bytes(rng, 32).hex().encode(),
                    b"v1,\xc3\xa9" + sig,
                    b" ".join([b"v1," + _b64(random_bytes(rng, 32)).encode()] * 60),
                ),
            ),
        )

    def secret_warning(self, value: str) -> str | None:
        if value.startswith(self.secret_prefix):
            try:
                size = len(standard_key(value))
            except ConfigurationError:
                return None  # refused as a bad secret, with its reason, before any run
            if size >= MIN_KEY_BYTES:
                return None
            return (
                f"holds a key of {size} byte{'' if size == 1 else 's'}: the secrets platforms "
                f"mint hold {MIN_KEY_BYTES} or more (Svix's and hookproof's do), so this one may "
                "have lost its end in a copy and paste (a receiver holding the whole secret "
                "refuses every delivery)"
            )
        return (
            f"does not start with 'whsec_': under the {self.name} scheme the key is the base64 "
            "after 'whsec_', so a receiver keyed with the string itself will refuse every signed "
            "delivery (pass the whsec_ secret, or --scheme stripe or github if the platform "
            "signs with the raw string)"
        )


@dataclass(frozen=True)
class SvixWebhooks(StandardWebhooks):
    """Standard Webhooks as Svix brands it: ``svix-id``, ``svix-timestamp``, ``svix-signature``."""

    name: ClassVar[str] = "svix"
    id_header: ClassVar[str] = "svix-id"
    timestamp_header: ClassVar[str] = "svix-timestamp"
    signature_header: ClassVar[str] = "svix-signature"

    @property
    def direct_verify(self) -> Verify:
        return verify_svix


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()
