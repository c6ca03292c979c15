"""The event envelope: the exact JSON bytes sent, their digest, and the checks an envelope must pass
before anything is sent (a failure dead-letters the delivery as ``invalid_envelope``).

The default body is ``{"type": …, "timestamp": <occurred_at>, "data": {…}}`` (plus ``"id"`` for the
Stripe-style scheme, whose receivers read the event id from the body). It is serialized once, at
publication; every attempt and every redrive sends these same bytes. Current time never enters it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from receiver.signing import scheme_named
from sender_sim.records import rfc3339

__all__ = [
    "ENVELOPE_SCHEMA_VERSION",
    "MAX_EVENT_ID_LENGTH",
    "build_body",
    "envelope_problem",
    "payload_digest",
]

MAX_EVENT_ID_LENGTH = 255

ENVELOPE_SCHEMA_VERSION = "hookproof.envelope/1"
"""The version of the body layout above, recorded with every attempt and transition."""


def build_body(
    *, event_type: str, occurred_at: datetime, data: Mapping[str, Any], event_id: str | None = None
) -> bytes:
    """The canonical body (compact JSON, UTF-8); ``event_id`` is included only when given."""
    document: dict[str, Any] = {}
    if event_id is not None:
        document["id"] = event_id
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
