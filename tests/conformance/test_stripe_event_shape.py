"""Under ``--scheme stripe`` the runner's generic event is a Stripe ``Event``: a receiver written
against Stripe's SDK, which reads ``event.data.object`` of whatever event it gets (as it may of
every event Stripe sends), acknowledges it instead of failing on a shape Stripe never sends."""

from __future__ import annotations

from tests.conformance.support import SECRET, app_settings, run_in_process
from tests.support.stripe_sdk import stripe_sdk_app


def test_an_sdk_handler_reading_data_object_acknowledges_the_generic_event() -> None:
    # what kind of object the event carries, read for any event
    app = stripe_sdk_app(SECRET, lambda data_object: data_object.object)
    settings = app_settings(None, scheme="stripe", select=("signature.valid", "clock.past-inside"))
    results = run_in_process(app, settings)
    assert {sid: r.outcome.value for sid, r in results.items()} == {
        "signature.valid": "passed",
        "clock.past-inside": "passed",
    }


def test_an_sdk_handler_reading_the_objects_id_acknowledges_the_generic_event() -> None:
    """Every Stripe object has an ``id``; a handler that logs or keys on it gets one (without it
    the SDK's attribute access raises, a 500 to a correct receiver)."""
    app = stripe_sdk_app(SECRET, lambda data_object: data_object.id)
    settings = app_settings(None, scheme="stripe", select=("signature.valid",))
    results = run_in_process(app, settings)
    assert results["signature.valid"].outcome.value == "passed"
