"""Stripe-style signing: ``stripe-signature: t=<ts>,v1=<hex>[,v1=<hex>…]`` over ``"{t}.{body}"``.

The HMAC key is the secret string's own bytes (Stripe's ``whsec_…`` included, undecoded); the
event id is the body's top-level ``"id"``.
"""

from __future__ import annotations

import base64
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from receiver.exceptions import ConfigurationError, InvalidPayload, MalformedHeader
from receiver.ijson import parse_leniently
from receiver.schemes.base import (
    MAX_SIGNATURE_HEADER,
    NON_ASCII_DIGITS,
    BrokenHeader,
    SchemeBase,
    Secret,
    VerifiedMessage,
    check_event_id,
    check_window,
    header,
    hex_candidates,
    hmac_digest,
    match,
    parse_timestamp,
    placed,
    random_bytes,
    verified,
)

__all__ = ["StripeStyle"]


def _body_event_id(document: object) -> str:
    event_id = document.get("id") if isinstance(document, dict) else None
    if not isinstance(event_id, str):
        raise InvalidPayload("the body must be a JSON object with a string 'id'")
    try:
        return check_event_id(event_id, "the body's 'id'")
    except MalformedHeader as error:
        raise InvalidPayload(str(error)) from None


@dataclass(frozen=True)
class StripeStyle(SchemeBase):
    """``Stripe-Signature: t=<ts>,v1=<hex>[,v1=<hex>…]`` over ``"{t}.{body}"``; id from the body."""

    name: ClassVar[str] = "stripe"
    uses_timestamp: ClassVar[bool] = True
    signature_header: ClassVar[str] = "stripe-signature"
    delivery_headers: ClassVar[tuple[tuple[str, str], ...]] = (
        ("content-type", "application/json; charset=utf-8"),
        ("user-agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)"),
    )
    id_in_body: ClassVar[bool] = True
    several_signatures: ClassVar[bool] = True
    clear_fields: ClassVar[frozenset[str]] = frozenset({"t", "secret"})
    describes_secret: ClassVar[bool] = True
    garbled_signature: ClassVar[str] = "t=abc,v1=zz"
    secret_prefix: ClassVar[str] = "whsec_"
    redaction_pattern: ClassVar[re.Pattern[str]] = re.compile(
        r"whsec_[A-Za-z0-9+/=]+|v[01]=[0-9a-fA-F]{64}"
    )

    def signed_content(self, body: bytes, *, event_id: str, timestamp: int) -> bytes:
        return b"%d.%s" % (timestamp, body)

    def sign(
        self, body: bytes, *, secrets: Sequence[Secret], event_id: str, timestamp: int
    ) -> dict[str, str]:
        signed = self.signed_content(body, event_id=event_id, timestamp=timestamp)
        parts = [f"t={timestamp}"] + [
            "v1=" + hmac_digest(s.raw_key(), signed, "sha256").hex() for s in secrets
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
        value = header(headers, self.signature_header)
        if len(value) > MAX_SIGNATURE_HEADER:
            raise MalformedHeader("the 'stripe-signature' header is too long")
        pairs = [item.partition("=") for item in value.split(",")]
        raw_ts = [v for name, eq, v in pairs if eq and name == "t"]
        if len(raw_ts) != 1:
            raise MalformedHeader("the 'stripe-signature' header must hold exactly one 't='")
        timestamp = parse_timestamp(raw_ts[0], "the 't=' of the 'stripe-signature' header")
        candidates = hex_candidates(v for n, eq, v in pairs if eq and n == "v1")
        check_window(timestamp, now, tolerance)
        index = match(keys, f"{raw_ts[0]}.".encode("ascii"), body, candidates)
        payload = parse_leniently(body)  # the one parse: the middleware's I-JSON check reuses it
        event_id = _body_event_id(payload.document)
        return verified(event_id, body, self.name, timestamp, index, payload)

    def event_id(self, headers: Mapping[str, str], body: bytes) -> str:
        """The body's top-level ``"id"`` when it is a string, else ``""``."""
        try:
            document = json.loads(body)
        except (ValueError, RecursionError):  # not UTF-8 or not JSON
            return ""
        found = document.get("id") if isinstance(document, dict) else None
        return found if isinstance(found, str) else ""

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
        version = "v1" if kind == "rotation" else "v0"
        signed = self.signed_content(body, event_id=event_id, timestamp=timestamp)
        bogus = hmac_digest(key, signed, "sha256").hex()
        ts, _, rest = headers[self.signature_header].partition(",")
        return {**headers, self.signature_header: f"{ts},{version}={bogus},{rest}"}

    def with_secret_hint(self, headers: Mapping[str, str], *, secret: Secret) -> dict[str, str]:
        """A ``secret=`` item masking ``secret`` but for its prefix and last four characters."""
        value = secret.value
        shown = value[: len(self.secret_prefix)] if value.startswith(self.secret_prefix) else ""
        masked = shown + "*" * max(0, len(value) - len(shown) - 4) + value[-4:]
        header = headers[self.signature_header]
        return {**headers, self.signature_header: f"{header},secret={masked}"}

    def timestamp_of(self, headers: Mapping[str, str]) -> int | None:
        """The ``t=`` of the signature header (the first one), ``None`` without one."""
        for item in headers.get(self.signature_header, "").split(","):
            name, eq, value = item.partition("=")
            if eq and name == "t":
                return int(value) if value.isascii() and value.isdigit() else None
        return None

    def signature_with(self, digest: bytes, *, timestamp: int) -> str:
        return f"t={timestamp},v1={digest.hex()}"

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
        stamp, _, valid = headers[self.signature_header].partition(",")
        entries = placed(valid, [f"v1={wrong.hex()}", f"v0={unknown.hex()}"], position)
        return {**headers, self.signature_header: ",".join([stamp, *entries])}

    def drop(
        self, role: str, headers: Mapping[str, str], body: bytes, *, secrets: Sequence[Secret]
    ) -> tuple[dict[str, str], bytes]:
        """The id leaves the body (signed again with ``secrets``), the timestamp the ``t=``."""
        if role == "id":
            timestamp = self.timestamp_of(headers)
            if timestamp is None:
                raise ConfigurationError("the delivery has no timestamp to sign again with")
            document = json.loads(body)
            document.pop("id", None)
            stripped = json.dumps(document, separators=(",", ":")).encode()
            return self.sign(stripped, secrets=secrets, event_id="", timestamp=timestamp), stripped
        if role == "timestamp":
            parts = [p for p in headers[self.signature_header].split(",") if not p.startswith("t=")]
            return {**headers, self.signature_header: ",".join(parts)}, body
        return super().drop(role, headers, body, secrets=secrets)

    def broken_headers(self, *, timestamp: int, rng: random.Random) -> tuple[BrokenHeader, ...]:
        ts = str(timestamp).encode()
        digest = random_bytes(rng, 32).hex().encode()
        return (
            BrokenHeader(
                self.signature_header,
                "signature",
                (
                    b"t=",
                    b"t=" + ts,
                    b"v1=" + digest,
                    b"t=" + ts + b",v1=",
                    b"t=" + ts + b",v1=zz",
                    b"t=abc,v1=" + digest,
                    b"t=1e9,v1=" + digest,
                    b"t=-1,v1=" + digest,
                    b"t=" + NON_ASCII_DIGITS + b",v1=" + digest,
                    b"t=" + ts + b";v1=" + digest,
                    b"t=" + ts + b",v1=" + base64.b64encode(bytes.fromhex(digest.decode())),
                    b"t="
                    + ts
                    + b","
                    + b",".join([b"v1=" + random_bytes(rng, 32).hex().encode()] * 60),
                ),
            ),
        )
