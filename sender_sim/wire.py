"""One attempt on the wire: the signed headers, the transport-failure taxonomy, the response sample.

Every attempt is signed afresh (a fresh timestamp from the wire clock) with the endpoint's scheme
from :mod:`receiver.signing`; the event id stays the ``webhook-id`` across retries and redrives.
The delivery metadata headers ``hookproof-delivery-id``, ``hookproof-attempt`` and
``hookproof-deadline`` ride along (informative only). Transport failures are sorted by exception
type into timeout, DNS, TLS, connect and other network errors. A response sample keeps at most 500
characters and never a secret, a signature or anything that looks like a ``whsec_`` key.

:class:`WireStamps` keeps a delivery's signed seconds from repeating: under the virtual clock a
whole retry schedule runs within one wall-clock second, yet every attempt (and every resend) of a
delivery carries a later timestamp than the one before, so a fresh signature.
"""

from __future__ import annotations

import socket
import ssl
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from datetime import datetime

import httpx

from receiver.clock import next_fresh_second
from receiver.signing import Secret, redact_signatures, scheme_named
from sender_sim.records import OutcomeKind, rfc3339

__all__ = [
    "ANSWER_BYTES",
    "ATTEMPT_HEADER",
    "DEADLINE_HEADER",
    "DELIVERY_ID_HEADER",
    "SAMPLE_LIMIT",
    "WireStamps",
    "failure_kind",
    "redact",
    "signed_headers",
    "tls_failure",
]

DELIVERY_ID_HEADER = "hookproof-delivery-id"
ATTEMPT_HEADER = "hookproof-attempt"
DEADLINE_HEADER = "hookproof-deadline"
SAMPLE_LIMIT = 500
ANSWER_BYTES = 8 * SAMPLE_LIMIT
"""How much of an answer's body an attempt reads: enough for its sample (even in UTF-8 of four
bytes a character), never more (an endless body would fill the sender's memory)."""


class WireStamps:
    """The last second signed for each recent delivery (at most ``size`` remembered)."""

    def __init__(self, size: int = 65_536) -> None:
        self.size = size
        self._last: OrderedDict[str, int] = OrderedDict()

    def knows(self, delivery_id: str) -> bool:
        return delivery_id in self._last

    def seed(self, delivery_id: str, last: int | None) -> None:
        """Remember ``last`` (read from the store) as the delivery's latest stamp."""
        if last is not None:
            self._last[delivery_id] = max(last, self._last.get(delivery_id, last))

    def next(self, delivery_id: str, candidate: int) -> int:
        """``candidate``, or the second after the delivery's last stamp when it would repeat."""
        stamp = next_fresh_second(candidate, self._last.get(delivery_id))
        self._last[delivery_id] = stamp
        self._last.move_to_end(delivery_id)
        if len(self._last) > self.size:
            self._last.popitem(last=False)
        return stamp


def signed_headers(
    *,
    scheme: str,
    secrets: Sequence[Secret],
    event_id: str,
    body: bytes,
    timestamp: int,
    delivery_id: str,
    attempt: int,
    deadline_at: datetime,
) -> dict[str, str]:
    """All request headers of one attempt: the platform's delivery headers (content type …),
    the signature headers, the simulator's metadata."""
    platform = scheme_named(scheme)
    headers = dict(platform.delivery_headers)
    headers.update(platform.sign(body, secrets=secrets, event_id=event_id, timestamp=timestamp))
    headers[DELIVERY_ID_HEADER] = delivery_id
    headers[ATTEMPT_HEADER] = str(attempt)
    headers[DEADLINE_HEADER] = rfc3339(deadline_at)
    return headers


def _chain(error: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


_CAUSES: tuple[tuple[type[BaseException], OutcomeKind], ...] = (
    (socket.gaierror, OutcomeKind.DNS),
    (ssl.SSLError, OutcomeKind.TLS),  # certificate verification failures included
)
"""The exception types, anywhere in a connect failure's cause chain, that name its kind."""


def failure_kind(error: httpx.RequestError) -> OutcomeKind:
    """Sort a transport failure by exception type: timeout, DNS, TLS, connect, or another
    network error.

    httpx raises its own type (``ConnectError``, ``ReadError``, a ``TimeoutException``) with the
    underlying one in the cause chain. A ``ConnectError`` (the request never left) raised from a
    ``socket.gaierror`` is DNS, from an ``ssl.SSLError`` TLS, otherwise a connect failure; a
    failure after connecting (a read or write error, even one inside TLS) is a network error. A
    timeout while connecting or waiting for a pooled connection is a connect failure too: the
    request never left, so the receiver cannot have it. The message's words are never consulted
    (they differ by platform and language).
    """
    if isinstance(error, httpx.ConnectTimeout | httpx.PoolTimeout):
        return OutcomeKind.CONNECT
    if isinstance(error, httpx.TimeoutException):
        return OutcomeKind.TIMEOUT
    if not isinstance(error, httpx.ConnectError):
        return OutcomeKind.NETWORK
    for cause in _chain(error):
        for kind_of_cause, kind in _CAUSES:
            if isinstance(cause, kind_of_cause):
                return kind
    return OutcomeKind.CONNECT


def _ssl_reason(error: ssl.SSLError, preferred: str | None = None) -> str:
    """OpenSSL's reason for ``error`` (its ``reason`` is only set when OpenSSL raised it)."""
    return preferred or getattr(error, "reason", None) or error.strerror or str(error)


def tls_failure(error: BaseException) -> str | None:
    """What went wrong in TLS when ``error`` (an httpx error, say) was caused by it, in one line
    with what to do about it; ``None`` for any other failure. A certificate that cannot be
    verified is named with OpenSSL's reason (``self-signed certificate``, ``certificate has
    expired``, ``Hostname mismatch …``); any other TLS failure (a plain-HTTP port given an
    ``https://`` URL) with its reason."""
    for cause in _chain(error):
        if isinstance(cause, ssl.SSLCertVerificationError):
            reason = _ssl_reason(cause, getattr(cause, "verify_message", None))
            return (
                f"its TLS certificate could not be verified ({reason}); for a private or "
                "self-signed CA, point SSL_CERT_FILE at its certificate (PEM)"
            )
        if isinstance(cause, ssl.SSLError):
            reason = _ssl_reason(cause).lower().replace("_", " ")
            return f"the TLS handshake failed ({reason}): is it served over plain http://?"
    return None


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` trimmed to :data:`SAMPLE_LIMIT` characters, secrets and signatures replaced."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = redact_signatures(text, "***")
    return text[:SAMPLE_LIMIT]
