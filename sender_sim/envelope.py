"""The event envelope: the exact JSON bytes sent, their digest, and the checks an envelope must pass
before anything is sent (a failure dead-letters the delivery as ``invalid_envelope``).

A built body has the layout of its endpoint's platform (:data:`BODY_LAYOUTS`, by scheme name):

* ``generic`` (Standard Webhooks' payload structure): ``{"type": …, "timestamp": <occurred_at>,
  "data": {…}}``, with a top-level ``"id"`` when the event id must travel in the body (an event
  fanned out to a Stripe-style endpoint too, or one no endpoint received);
* ``stripe-event`` (the ``stripe`` scheme): a Stripe ``Event`` object, ``{"id", "object": "event",
  "api_version", "created": <occurred_at in Unix seconds>, "data": {"object": {…}}, "livemode",
  "pending_webhooks", "request", "type"}``, the data being ``data.object``: a handler written
  against Stripe's SDK reads ``event.data.object`` of any event, as it may of every event Stripe
  sends (:func:`stripe_event_document`, the one spelling of that shape; the conformance runner's
  Stripe template is made from it too).

A body is serialized once, at publication; every attempt and every redrive sends these same bytes.
Current time never enters it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final, Literal

from receiver.signing import scheme_named
from sender_sim.records import rfc3339

__all__ = [
    "BODY_LAYOUTS",
    "ENVELOPE_SCHEMA_VERSION",
    "MAX_EVENT_ID_LENGTH",
    "STRIPE_API_VERSION",
    "BodyLayout",
    "body_layout",
    "build_body",
    "envelope_problem",
    "payload_digest",
    "stripe_event_document",
]

MAX_EVENT_ID_LENGTH = 255

ENVELOPE_SCHEMA_VERSION = "hookproof.envelope/2"
"""The version of the body layouts above, recorded with every attempt and transition (``/2``: a
Stripe-style body is a Stripe ``Event``; ``/1`` sent the generic layout with an ``"id"``)."""


BodyLayout = Literal["generic", "stripe-event"]

BODY_LAYOUTS: Final[Mapping[str, BodyLayout]] = {"stripe": "stripe-event"}
"""The body layout of a scheme whose platform shapes its events its own way; others: generic."""

STRIPE_API_VERSION: Final = "2024-06-20"
"""The ``api_version`` a Stripe-style event carries (an SDK pinned to another one may refuse it:
send a whole body of your own then)."""


def body_layout(schemes: Iterable[str]) -> BodyLayout:
    """The layout of one event's body sent to endpoints of ``schemes`` (every endpoint of an event
    gets the same bytes, so a Stripe-style endpoint among them makes it a Stripe ``Event``)."""
    layouts = {BODY_LAYOUTS.get(scheme, "generic") for scheme in schemes}
    return "stripe-event" if "stripe-event" in layouts else "generic"


def stripe_event_document(
    *, event_id: str, event_type: str, created: int, data_object: Mapping[str, Any]
) -> dict[str, Any]:
    """A Stripe ``Event`` object carrying ``data_object`` as ``data.object``."""
    return {
        "id": event_id,
        "object": "event",
        "api_version": STRIPE_API_VERSION,
        "created": created,
        "data": {"object": dict(data_object)},
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": None, "idempotency_key": None},
        "type": event_type,
    }


def build_body(
    *,
    event_type: str,
    occurred_at: datetime,
    data: Mapping[str, Any],
    event_id: str | None = None,
    layout: BodyLayout = "generic",
) -> bytes:
    """The canonical body (compact JSON, UTF-8) in ``layout``; a generic body carries ``event_id``
    only when given, a Stripe ``Event`` always (it is required then)."""
    document: dict[str, Any]
    if layout == "stripe-event":
        if event_id is None:
            raise ValueError("a Stripe-style event body needs its event id")
        document = stripe_event_document(
            event_id=event_id,
            event_type=event_type,
            created=int(occurred_at.timestamp()),
            data_object=data,
        )
    else:
        document = {} if event_id is None else {"id": event_id}
        document.update(type=event_type, timestamp=rfc3339(occurred_at), data=dict(data))
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def payload_digest(body: bytes) -> str:
    """SHA-256 of the body, hex."""
    return hashlib.sha256(body).hexdigest()


def _event_id_problem(event_id: str) -> str | None:
    if not (
        isinstance(event_id, str)
        and 0 < len(event_id) <= MAX_EVENT_ID_LENGTH
        and event_id.isascii()
        and event_id.isprintable()
        and " " not in event_id
    ):
        return f"the event id must be 1-{MAX_EVENT_ID_LENGTH} visible ASCII characters"
    return None


def envelope_problem(
    *, event_id: str, event_type: str, body: bytes, scheme: str, max_body_bytes: int
) -> str | None:
    """Why this envelope must not be sent, or ``None`` when it is valid."""
    problem = _event_id_problem(event_id)
    if problem:
        return problem
    if not isinstance(event_type, str) or not event_type.strip() or len(event_type) > 255:
        return "the event type must be a non-empty string of at most 255 characters"
    if len(body) > max_body_bytes:
        return f"the body is {len(body)} bytes, over the limit of {max_body_bytes}"
    try:
        document = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        return "the body is not UTF-8"
    except (json.JSONDecodeError, RecursionError):
        return "the body is not JSON"
    if not isinstance(document, dict):
        return "the body must be a JSON object"
    if scheme_named(scheme).id_in_body and document.get("id") != event_id:
        return f"a {scheme}-style body must carry the event id as its top-level 'id'"
    return None
