"""The wire scheme's public face: signing and verifying webhook deliveries, both halves here.

Four schemes sit behind one interface, :class:`Scheme`, in :mod:`receiver.schemes`:

* :class:`StandardWebhooks` (the default) — ``webhook-id``, ``webhook-timestamp`` and
  ``webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">``, ``whsec_`` secrets,
  several space-separated signatures, unknown versions ignored;
* :class:`SvixWebhooks` — the same as Svix sends it, with ``svix-id``, ``svix-timestamp`` and
  ``svix-signature``;
* :class:`StripeStyle` — ``stripe-signature: t=<ts>,v1=<hex>`` over ``"{t}.{body}"``, the key being
  the secret string's bytes; the event id is the body's top-level ``"id"``;
* :class:`GitHubStyle` — ``x-hub-signature-256: sha256=<hex>`` over the body, no timestamp (replay
  protection comes from the inbox alone); the event id is ``x-github-delivery``.

This module adds :class:`Verifier`: several active secrets (rotation), keys derived once, the clock
read at call time unless ``now`` is given. A timestamp is accepted iff ``now - tolerance <=
timestamp <= now + tolerance`` in whole seconds (``now`` floored), so a timestamp exactly
``tolerance`` seconds away is accepted and one second more is refused. Verification works on the
raw bytes received and compares in constant time. Every failure is a
:class:`~receiver.exceptions.VerificationError`; no ``ValueError``, ``binascii.Error`` or
``UnicodeDecodeError`` escapes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from receiver.clock import Clock, seconds_source, system_clock
from receiver.exceptions import ConfigurationError, MissingHeader
from receiver.schemes.base import (
    DEFAULT_TOLERANCE_S,
    NON_ASCII_DIGITS,
    BrokenHeader,
    Scheme,
    Secret,
    VerifiedMessage,
    compare,
    fingerprint,
    random_bytes,
)
from receiver.schemes.github import GitHubStyle
from receiver.schemes.registry import (
    SCHEMES,
    event_id_of,
    redact_signatures,
    scheme_named,
    secret_warnings,
)
from receiver.schemes.standard import StandardWebhooks, SvixWebhooks
from receiver.schemes.stripe import StripeStyle

__all__ = [
    "DEFAULT_TOLERANCE_S",
    "NON_ASCII_DIGITS",
    "SCHEMES",
    "BrokenHeader",
    "GitHubStyle",
    "Scheme",
    "Secret",
    "StandardWebhooks",
    "StripeStyle",
    "SvixWebhooks",
    "VerifiedMessage",
    "Verifier",
    "event_id_of",
    "fingerprint",
    "random_bytes",
    "redact_signatures",
    "scheme_named",
    "secret_warnings",
]

_compare = compare  # re-exported for tests that watch the constant-time compare


@dataclass(frozen=True)
class Verifier:
    """Verifies deliveries for one scheme against several active secrets (rotation).

    Keys are derived once, at construction; a bad secret is a :class:`ConfigurationError` here,
    not a failure per request. ``clock`` is read at each call that gives no ``now``: a
    :class:`~receiver.clock.Clock` (``now() -> datetime``) or, as before, a callable returning
    Unix seconds.
    """

    secrets: Sequence[Secret]
    scheme: Scheme = field(default_factory=StandardWebhooks)
    tolerance: int = DEFAULT_TOLERANCE_S
    clock: Clock | Callable[[], float] = system_clock
    _keys: tuple[bytes, ...] = field(init=False, repr=False, compare=False)
    _direct: Callable[..., VerifiedMessage] | None = field(init=False, repr=False, compare=False)
    _seconds: Callable[[], float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.secrets:
            raise ConfigurationError("at least one webhook secret is required")
        if isinstance(self.tolerance, bool) or not isinstance(self.tolerance, int):
            raise ConfigurationError("the tolerance must be a whole number of seconds")
        if self.tolerance < 0:
            raise ConfigurationError("the tolerance must not be negative")
        object.__setattr__(self, "_keys", tuple(self.scheme.key(s) for s in self.secrets))
        # A Standard Webhooks scheme's verify is called directly: one call and no keywords
        # fewer per delivery (bench/bench_verify.py).
        direct = getattr(self.scheme, "direct_verify", None)
        object.__setattr__(self, "_direct", direct)
        object.__setattr__(self, "_seconds", seconds_source(self.clock))

    def verify(
        self, body: bytes, headers: Mapping[str, str], now: float | None = None
    ) -> VerifiedMessage:
        """Check one delivery. ``headers`` may use any case; ``now`` defaults to the clock."""
        if now is None:
            now = self._seconds()
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
