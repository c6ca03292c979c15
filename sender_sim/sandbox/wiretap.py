"""The requests the sandbox actually sent, as the dashboard shows them: the URL and headers with
signatures and credentials redacted (:mod:`receiver.redaction`) and the exact body bytes, per
delivery and attempt number.

:class:`WireTap` is an httpx request hook installed on the simulator's client by the engine: each
outgoing request that carries the ``hookproof-delivery-id`` and ``hookproof-attempt`` headers is
kept (at most :data:`KEEP` of them, oldest dropped). The store keeps no request headers, so for an
attempt the tap did not see (an earlier session) :func:`reconstructed` rebuilds them from the
record: the same names and metadata, the timestamp from the attempt's start, the signature shown
only as redacted.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import httpx

from receiver.redaction import REDACTED, is_credential, shown_url
from receiver.signing import redact_signatures, scheme_named
from sender_sim.records import Attempt, Delivery, Event, rfc3339
from sender_sim.wire import ATTEMPT_HEADER, DEADLINE_HEADER, DELIVERY_ID_HEADER

__all__ = ["KEEP", "REDACTED", "SentRequest", "WireTap", "reconstructed"]

KEEP = 2000


@dataclass(frozen=True)
class SentRequest:
    """One request as sent: method, URL, headers in order (redacted), exact body bytes."""

    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    captured: bool = True
    """``False``: rebuilt from the stored record (the tap did not see this attempt)."""


def _redact(name: str, value: str) -> str:
    if "signature" in name.lower() or is_credential(name):
        return REDACTED
    return redact_signatures(value, REDACTED)


class WireTap:
    """Keeps the last :data:`KEEP` requests the simulator sent (see the module docstring)."""

    def __init__(self, keep: int = KEEP) -> None:
        self._keep = keep
        self._sent: OrderedDict[tuple[str, int], SentRequest] = OrderedDict()

    def install(self, client: httpx.AsyncClient) -> None:
        hooks = client.event_hooks
        if self.on_request not in hooks["request"]:
            hooks["request"] = [*hooks["request"], self.on_request]
            client.event_hooks = hooks

    async def on_request(self, request: httpx.Request) -> None:
        delivery_id = request.headers.get(DELIVERY_ID_HEADER)
        attempt = request.headers.get(ATTEMPT_HEADER, "")
        if not delivery_id or not attempt.isdigit():
            return
        headers = tuple((k, _redact(k, v)) for k, v in request.headers.multi_items())
        url = shown_url(str(request.url))
        sent = SentRequest(request.method, url, headers, bytes(request.content))
        key = (delivery_id, int(attempt))
        self._sent[key] = sent
        self._sent.move_to_end(key)
        while len(self._sent) > self._keep:
            self._sent.popitem(last=False)

    def get(self, delivery_id: str, attempt: int) -> SentRequest | None:
        return self._sent.get((delivery_id, attempt))


def reconstructed(delivery: Delivery, event: Event, attempt: Attempt) -> SentRequest:
    """The request of ``attempt`` rebuilt from the records (standard-webhooks header names)."""
    headers = (
        *scheme_named("standard").delivery_headers,
        ("webhook-id", event.event_id),
        ("webhook-timestamp", str(int(attempt.started_at.timestamp()))),
        ("webhook-signature", REDACTED),
        (DELIVERY_ID_HEADER, delivery.delivery_id),
        (ATTEMPT_HEADER, str(attempt.number)),
        (DEADLINE_HEADER, rfc3339(delivery.deadline_at)),
    )
    url = shown_url(delivery.destination_url)
    return SentRequest("POST", url, headers, event.body, captured=False)
