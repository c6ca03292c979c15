"""The body layouts: the generic Standard Webhooks structure, and a Stripe ``Event`` for a
Stripe-style endpoint, which a handler written against Stripe's SDK reads as ``event.data.object``
(``hookproof send --scheme stripe`` over real HTTP to such a handler)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conformance.cli import main
from conformance.payloads import STRIPE_EVENT_TEMPLATE, PayloadFactory
from receiver.server import running_server
from sender_sim.envelope import body_layout, build_body, envelope_problem
from tests.sender_sim.test_cli_support import SECRET
from tests.support.stripe_sdk import stripe_sdk_app

OCCURRED = datetime(2026, 8, 13, 9, 0, 5, tzinfo=UTC)


def test_the_generic_layout_is_unchanged() -> None:
    body = build_body(event_type="invoice.paid", occurred_at=OCCURRED, data={"amount": 42})
    assert json.loads(body) == {
        "type": "invoice.paid",
        "timestamp": "2026-08-13T09:00:05.000000Z",
        "data": {"amount": 42},
    }


def test_a_stripe_style_body_is_a_stripe_event_carrying_the_data_as_data_object() -> None:
    body = build_body(
        event_type="invoice.paid",
        occurred_at=OCCURRED,
        data={"object": "invoice", "amount_paid": 4200},
        event_id="evt_1",
        layout="stripe-event",
    )
    document = json.loads(body)
    assert document["id"] == "evt_1"
    assert document["object"] == "event"
    assert document["type"] == "invoice.paid"
    assert document["created"] == int(OCCURRED.timestamp())
    assert document["data"] == {"object": {"object": "invoice", "amount_paid": 4200}}
    assert document["livemode"] is False
    assert (
        envelope_problem(
            event_id="evt_1",
            event_type="invoice.paid",
            body=body,
            scheme="stripe",
            max_body_bytes=1 << 20,
        )
        is None
    )


def test_a_stripe_event_needs_its_id() -> None:
    with pytest.raises(ValueError, match="event id"):
        build_body(event_type="t", occurred_at=OCCURRED, data={}, layout="stripe-event")


@pytest.mark.parametrize(
    ("schemes", "layout"),
    [
        (("standard",), "generic"),
        (("github", "svix"), "generic"),
        (("stripe",), "stripe-event"),
        (("standard", "stripe"), "stripe-event"),  # one body for every endpoint of the event
        ((), "generic"),
    ],
)
def test_the_layout_of_an_event_follows_its_endpoints(
    schemes: tuple[str, ...], layout: str
) -> None:
    assert body_layout(schemes) == layout


def test_the_runners_stripe_template_has_the_simulators_shape() -> None:
    """One spelling of the Stripe ``Event``: the runner's template and a built body share keys."""
    runner = json.loads(PayloadFactory(STRIPE_EVENT_TEMPLATE, id_in_body=True).body("evt_1"))
    built = json.loads(
        build_body(
            event_type=runner["type"],
            occurred_at=OCCURRED,
            data=runner["data"]["object"],
            event_id="evt_1",
            layout="stripe-event",
        )
    )
    assert list(runner) == list(built)
    assert {k: v for k, v in runner.items() if k != "created"} == {
        k: v for k, v in built.items() if k != "created"
    }


def test_send_under_the_stripe_scheme_reaches_a_stripe_sdk_handler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[object] = []

    def read(data_object: Any) -> object:
        seen.append(data_object.amount_paid)  # what a Stripe SDK handler reads
        return data_object.amount_paid

    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.json").write_text('{"object": "invoice", "amount_paid": 4200}')
    app = stripe_sdk_app(SECRET, read)
    with running_server(app) as base:
        code = main(
            [
                "send",
                f"{base}/webhooks",
                "--scheme",
                "stripe",
                "--secret",
                SECRET,
                "--event-type",
                "invoice.paid",
                "--event",
                "data.json",
                "--event-id",
                "evt_stripe_1",
            ]
        )
    out = capsys.readouterr().out
    assert code == 0, out
    assert seen == [4200]
