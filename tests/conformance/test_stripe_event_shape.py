"""Under ``--scheme stripe`` the runner's generic event is a Stripe ``Event``: a receiver written
against Stripe's SDK, which reads ``event.data.object`` of whatever event it gets (as it may of
every event Stripe sends), acknowledges it instead of failing on a shape Stripe never sends."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.conformance.support import SECRET, app_settings, run_in_process

stripe = pytest.importorskip("stripe", reason="the stripe library is not installed")


async def _webhook(request: Request) -> Response:
    payload = await request.body()
    try:
        event = stripe.Webhook.construct_event(
            payload, request.headers.get("stripe-signature", ""), SECRET
        )
    except (ValueError, stripe.SignatureVerificationError):
        return Response(status_code=400)
    handled = event.data.object.object  # what kind of object the event carries, for any event
    return JSONResponse({"received": event.id, "object": handled})


def test_an_sdk_handler_reading_data_object_acknowledges_the_generic_event() -> None:
    app = Starlette(routes=[Route("/webhooks", _webhook, methods=["POST"])])
    settings = app_settings(None, scheme="stripe", select=("signature.valid", "clock.past-inside"))
    results = run_in_process(app, settings)
    assert {sid: r.outcome.value for sid, r in results.items()} == {
        "signature.valid": "passed",
        "clock.past-inside": "passed",
    }
