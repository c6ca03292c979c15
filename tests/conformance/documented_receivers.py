"""Correct receivers written the way the public documentation shows, one per scheme, each
answering 400 (or GitHub's 403) to a refusal — not hookproof's 401 convention.

- standard: the ``standardwebhooks`` library, as its README and Svix's docs show
  (``Webhook(secret).verify(body, headers)``; ``WebhookVerificationError`` → 400).
- stripe: Stripe's "verify signatures manually" recipe (``t=`` and ``v1=`` entries of
  ``Stripe-Signature``, HMAC-SHA256 of ``"{t}.{payload}"`` in hex, a 300 s tolerance; 400).
- github: GitHub's "validating webhook deliveries" recipe (``X-Hub-Signature-256: sha256=<hex>``
  of the body; 403 when it is missing or does not match).

Around the verification each keeps the same small inbox (claim the event id, yield while
"working", commit, then 2xx; a copy of an event in flight gets 503 with Retry-After; a committed
duplicate gets 200) and implements the probe contract.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

PROBE_TOKEN = "documented-probe-token"
TOLERANCE = 300


class Refused(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status


Verify = Callable[[Mapping[str, str], bytes], str]
"""Verifies a delivery and gives its event id, or raises :class:`Refused`."""


def standard_verifier(secret: str) -> Verify:
    webhook = Webhook(secret)

    def verify(headers: Mapping[str, str], body: bytes) -> str:
        try:
            webhook.verify(body, dict(headers))
        except (WebhookVerificationError, ValueError) as error:
            # ValueError too: the library raises it for a malformed entry ("v1" without a comma,
            # bad base64); catching only WebhookVerificationError makes that a 500.
            raise Refused(400, str(error)) from None
        return headers["webhook-id"]

    return verify


def stripe_verifier(secret: str) -> Verify:
    def verify(headers: Mapping[str, str], body: bytes) -> str:
        header = headers.get("stripe-signature")
        if header is None:
            raise Refused(400, "missing Stripe-Signature")
        pairs = [item.split("=", 1) for item in header.split(",") if "=" in item]
        stamps = [value for key, value in pairs if key == "t"]
        signatures = [value for key, value in pairs if key == "v1"]
        if len(stamps) != 1 or not stamps[0].isdigit() or not signatures:
            raise Refused(400, "unable to extract timestamp and signatures")
        signed = stamps[0].encode() + b"." + body
        expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
        wanted = expected.encode()
        if not any(hmac.compare_digest(wanted, s.encode("latin-1")) for s in signatures):
            raise Refused(400, "no signatures found matching the expected signature")
        if abs(time.time() - int(stamps[0])) > TOLERANCE:
            raise Refused(400, "timestamp outside the tolerance zone")
        try:
            event = json.loads(body)
        except ValueError:
            raise Refused(400, "invalid payload") from None
        if not isinstance(event, dict) or not isinstance(event.get("id"), str):
            raise Refused(400, "no event id")
        return str(event["id"])

    return verify


def github_verifier(secret: str) -> Verify:
    def verify(headers: Mapping[str, str], body: bytes) -> str:
        signature = headers.get("x-hub-signature-256")
        if signature is None:
            raise Refused(403, "x-hub-signature-256 header is missing!")
        expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        # bytes, not str: compare_digest raises TypeError on a non-ASCII str (a 500)
        if not hmac.compare_digest(expected.encode(), signature.encode("latin-1")):
            raise Refused(403, "Request signatures didn't match!")
        delivery = headers.get("x-github-delivery", "")
        # not signed, so checked for shape: the dedupe key must be a sane token (GitHub: a GUID)
        if not delivery or not delivery.isascii() or len(delivery) > 255 or " " in delivery:
            raise Refused(400, "missing or malformed X-GitHub-Delivery")
        return delivery

    return verify


VERIFIERS: Mapping[str, Callable[[str], Verify]] = {
    "standard": standard_verifier,
    "stripe": stripe_verifier,
    "github": github_verifier,
}


@dataclass
class _Inbox:
    state: dict[str, str] = field(default_factory=dict)
    effects: dict[str, int] = field(default_factory=dict)
    deliveries: dict[str, int] = field(default_factory=dict)


def documented_receiver(scheme: str, secret: str) -> Starlette:
    """The documented receiver of ``scheme`` on ``POST /webhooks``, its probe on
    ``GET /_hookproof/events/{event_id}``."""
    verify = VERIFIERS[scheme](secret)
    inbox = _Inbox()

    async def webhook(request: Request) -> Response:
        body = await request.body()
        try:
            event_id = verify(request.headers, body)
            json.loads(body)
        except Refused as refusal:
            return PlainTextResponse(str(refusal), status_code=refusal.status)
        except ValueError:
            return PlainTextResponse("invalid payload", status_code=400)
        inbox.deliveries[event_id] = inbox.deliveries.get(event_id, 0) + 1
        known = inbox.state.get(event_id)
        if known == "committed":
            return JSONResponse({"received": True, "duplicate": True})
        if known == "in_flight":
            return Response(status_code=503, headers={"retry-after": "1"})
        inbox.state[event_id] = "in_flight"
        for _ in range(3):
            await asyncio.sleep(0)  # the handler's work: concurrent copies overlap here
        inbox.effects[event_id] = inbox.effects.get(event_id, 0) + 1
        inbox.state[event_id] = "committed"
        return JSONResponse({"received": True})

    async def probe(request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {PROBE_TOKEN}":
            return Response(status_code=401)
        event_id = request.path_params["event_id"]
        if event_id not in inbox.state:
            return Response(status_code=404)
        return JSONResponse(
            {
                "event_id": event_id,
                "status": inbox.state[event_id],
                "effects": inbox.effects.get(event_id, 0),
                "deliveries": inbox.deliveries.get(event_id, 0),
            }
        )

    return Starlette(
        routes=[
            Route("/webhooks", webhook, methods=["POST"]),
            Route("/_hookproof/events/{event_id}", probe, methods=["GET"]),
        ]
    )
