"""GitHub-style signing: ``x-hub-signature-256: sha256=<hex>`` over the body, no timestamp.

Replay protection comes from the inbox alone; the event id is ``x-github-delivery``; the HMAC key
is the secret string's own bytes; a delivery carries one signature only. Beside it every delivery
carries, as GitHub's do, the legacy ``x-hub-signature: sha1=<hex>`` of the same body and secret
("provided for compatibility with existing integrations"): verification here reads only the
SHA-256 header, but a receiver built on GitHub's older recipe reads the SHA-1 one, and
:meth:`GitHubStyle.agreeing` keeps the two saying the same thing on a request whose SHA-256
signature was broken on purpose.
"""

from __future__ import annotations

import base64
import hmac
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from receiver.exceptions import MalformedHeader
from receiver.schemes.base import (
    BrokenHeader,
    SchemeBase,
    Secret,
    VerifiedMessage,
    check_event_id,
    header,
    hex_candidates,
    hmac_digest,
    match,
    random_bytes,
    verified,
)

__all__ = ["GitHubStyle"]


@dataclass(frozen=True)
class GitHubStyle(SchemeBase):
    """``X-Hub-Signature-256: sha256=<hex>`` over the body; the id is ``X-GitHub-Delivery``."""

    name: ClassVar[str] = "github"
    uses_timestamp: ClassVar[bool] = False
    signature_header: ClassVar[str] = "x-hub-signature-256"
    delivery_headers: ClassVar[tuple[tuple[str, str], ...]] = (
        ("content-type", "application/json"),
        ("user-agent", "GitHub-Hookshot/hookproof"),
        # The event name: GitHub always sends one, and receivers route on it (Octokit's
        # middleware and go-github's ParseWebHook refuse a delivery without it). "ping" is the
        # event every GitHub receiver is sent first and must accept.
        ("x-github-event", "ping"),
    )
    legacy_header: ClassVar[str] = "x-hub-signature"
    """GitHub's SHA-1 signature header, sent beside the SHA-256 one for older integrations."""
    companion_headers: ClassVar[frozenset[str]] = frozenset({legacy_header})
    id_header: ClassVar[str | None] = "x-github-delivery"
    unsigned_headers: ClassVar[frozenset[str]] = frozenset({"x-github-delivery"})
    case_sensitive_ids: ClassVar[bool] = False  # a GUID
    garbled_signature: ClassVar[str] = "sha256=zz"
    redaction_pattern: ClassVar[re.Pattern[str]] = re.compile(
        r"sha256=[0-9a-fA-F]{64}|sha1=[0-9a-fA-F]{40}"
    )

    def signed_content(self, body: bytes, *, event_id: str, timestamp: int) -> bytes:
        return body

    def sign(
        self, body: bytes, *, secrets: Sequence[Secret], event_id: str, timestamp: int
    ) -> dict[str, str]:
        key = secrets[0].raw_key()
        return {
            self.signature_header: self._own_signature(key, body),
            self.legacy_header: f"sha1={hmac_digest(key, body, 'sha1').hex()}",
            "x-github-delivery": event_id,
        }

    def _own_signature(self, key: bytes, body: bytes) -> str:
        """The ``x-hub-signature-256`` value of ``body`` under ``key``."""
        return self.signature_with(hmac_digest(key, body, "sha256"), timestamp=0)

    def agreeing(
        self, headers: Sequence[tuple[str, bytes]], body: bytes, *, keys: Sequence[bytes]
    ) -> tuple[tuple[str, bytes], ...]:
        own = [value for name, value in headers if name.lower() == self.signature_header]
        genuine = len(own) == 1 and any(
            hmac.compare_digest(own[0], self._own_signature(key, body).encode()) for key in keys
        )
        if genuine:
            return tuple(headers)
        return tuple(
            (name, value) for name, value in headers if name.lower() not in self.companion_headers
        )

    def signature_values(self, headers: Mapping[str, str]) -> list[str]:
        legacy = headers.get(self.legacy_header, "").partition("=")[2]
        return [*super().signature_values(headers), *([legacy] if len(legacy) > 8 else [])]

    def verify(
        self,
        body: bytes,
        headers: Mapping[str, str],
        *,
        keys: Sequence[bytes],
        now: float,
        tolerance: int,
    ) -> VerifiedMessage:
        event_id = check_event_id(header(headers, "x-github-delivery"), "'x-github-delivery'")
        value = header(headers, self.signature_header)
        algorithm, eq, digest = value.partition("=")
        if not eq or algorithm != "sha256" or len(digest) != 64:
            raise MalformedHeader("the 'x-hub-signature-256' header must be 'sha256=<64 hex>'")
        candidates = hex_candidates([digest])
        if not candidates:
            raise MalformedHeader("the 'x-hub-signature-256' header must be 'sha256=<64 hex>'")
        index = match(keys, b"", body, candidates)
        return verified(event_id, body, self.name, None, index)

    def signature_with(self, digest: bytes, *, timestamp: int) -> str:
        return f"sha256={digest.hex()}"

    def broken_headers(self, *, timestamp: int, rng: random.Random) -> tuple[BrokenHeader, ...]:
        digest = random_bytes(rng, 32).hex().encode()
        return (
            BrokenHeader("x-github-delivery", "id"),
            BrokenHeader(
                self.signature_header,
                "signature",
                (
                    b"sha256=",
                    b"sha256=" + b"g" * 64,
                    b"sha1=" + random_bytes(rng, 20).hex().encode(),
                    # another algorithm's name: a receiver that hashes with the name it is
                    # given (PHP's hash_hmac($algo, ...)) throws on a non-cryptographic one
                    b"crc32b=" + random_bytes(rng, 4).hex().encode(),
                    b"md5=" + random_bytes(rng, 16).hex().encode(),
                    b"sha256:" + digest,
                    b"sha256=" + base64.b64encode(bytes.fromhex(digest.decode())),
                ),
            ),
        )
