"""One attempt on the wire: the signed headers, the transport-failure taxonomy, the response sample.

Every attempt is signed afresh (a fresh timestamp from the wire clock) with the endpoint's scheme
from :mod:`receiver.signing`; the event id stays the ``webhook-id`` across retries and redrives.
The delivery metadata headers ``hookproof-delivery-id``, ``hookproof-attempt`` and
``hookproof-deadline`` ride along (informative only). Transport failures are sorted into timeout,
DNS, TLS, connect and other network errors (all ambiguous). A response sample keeps at most 500
characters and never a secret, a signature or anything that looks like a ``whsec_`` key.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterable, Sequence
from datetime import datetime

import httpx

from receiver.signing import Secret, redact_signatures, scheme_named
from sender_sim.records import OutcomeKind, rfc3339

__all__ = [
    "ATTEMPT_HEADER",
    "DEADLINE_HEADER",
    "DELIVERY_ID_HEADER",
    "SAMPLE_LIMIT",
    "failure_kind",
    "redact",
    "signed_headers",
]

DELIVERY_ID_HEADER = "hookproof-delivery-id"
ATTEMPT_HEADER = "hookproof-attempt"
DEADLINE_HEADER = "hookproof-deadline"
SAMPLE_LIMIT = 500
_DNS_WORDS = (
    "name or service not known",
    "nodename nor servname",
    "temporary failure in name resolution",
    "getaddrinfo",
    "no address associated",
    "name resolution",
    "dns",
)
_TLS_WORDS = ("ssl", "tls", "certificate", "handshake")


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
    """All request headers of one attempt: content type, signature headers, metadata."""
    headers = {"content-type": "application/json"}
    headers.update(
        scheme_named(scheme).sign(body, secrets=secrets, event_id=event_id, timestamp=timestamp)
    )
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


def failure_kind(error: httpx.RequestError) -> OutcomeKind:
    """Sort a transport failure: timeout, DNS, TLS, connect, or another network error."""
    if isinstance(error, httpx.TimeoutException):
        return OutcomeKind.TIMEOUT
    chain = list(_chain(error))
    if any(isinstance(e, socket.gaierror) for e in chain):
        return OutcomeKind.DNS
    if any(isinstance(e, ssl.SSLError) for e in chain):
        return OutcomeKind.TLS
    text = " ".join(str(e) for e in chain).lower()
    if isinstance(error, httpx.ConnectError):
        if any(word in text for word in _DNS_WORDS):
            return OutcomeKind.DNS
        if any(word in text for word in _TLS_WORDS):
            return OutcomeKind.TLS
        return OutcomeKind.CONNECT
    return OutcomeKind.NETWORK


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` trimmed to :data:`SAMPLE_LIMIT` characters, secrets and signatures replaced."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = redact_signatures(text, "***")
    return text[:SAMPLE_LIMIT]
