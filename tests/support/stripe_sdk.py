"""A receiver written the way Stripe's docs show: ``stripe.Webhook.construct_event`` over the raw
body, then whatever the handler reads of ``event.data.object`` (the tests that need it skip where
the ``stripe`` library is not installed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


def stripe_sdk_app(secret: str, read: Callable[[Any], object]) -> Starlette:
    """A Starlette app at ``/webhooks`` that verifies with Stripe's SDK (400 on a refusal) and
    answers ``{"received": event.id, "read": read(event.data.object)}``."""
    stripe = pytest.importorskip("stripe", reason="the stripe library is not installed")

    async def webhook(request: Request) -> Response:
        payload = await request.body()
        try:
            event = stripe.Webhook.construct_event(
                payload, request.headers.get("stripe-signature", ""), secret
            )
        except (ValueError, stripe.SignatureVerificationError):
            return Response(status_code=400)
        return JSONResponse({"received": event.id, "read": read(event.data.object)})

    return Starlette(routes=[Route("/webhooks", webhook, methods=["POST"])])
