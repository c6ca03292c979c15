"""The pure transitions refuse a delivery in the wrong state with the package's own error."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from sender_sim import (
    STRICT,
    Delivery,
    InvalidTransition,
    Outcome,
    Policy,
    SimulatorError,
    State,
)
from sender_sim.transitions import settle
from tests.sender_sim.conftest import T0, URL


def test_settling_a_delivery_that_is_not_leased_is_an_invalid_transition() -> None:
    delivery = Delivery(
        delivery_id="del_1",
        event_id="evt_1",
        endpoint_id="partner",
        destination_url=URL,
        payload_digest="sha256:x",
        business_key=None,
        state=State.SCHEDULED,
        deadline_at=T0 + timedelta(hours=1),
        attempt=0,
        max_attempts=3,
        scheduled_for=T0,
        next_attempt_at=T0,
        created_at=T0,
        updated_at=T0,
    )
    outcome = Outcome.response(200)
    with pytest.raises(InvalidTransition, match="leased") as raised:
        settle(
            delivery,
            outcome,
            STRICT.classify(outcome),
            worker="w",
            now=T0,
            policy=Policy(),
            rng=random.Random(0),
        )
    assert isinstance(raised.value, SimulatorError)
    assert isinstance(raised.value, ValueError)
