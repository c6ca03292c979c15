"""The probe: a token-guarded window onto the inbox, so a conformance run can observe effects.

``GET <prefix>/<event_id>`` with ``Authorization: Bearer <token>`` answers::

    {"event_id": "...", "status": "committed" | "in_flight", "effects": <int>, "deliveries": <int>}

or a 404 problem when the inbox holds no record of the event (``event-id-required`` when the path
names no event at all). An id no delivery can carry (:func:`~receiver.schemes.base.is_event_id`:
a control character such as ``%00``, a space, non-ASCII, over 255 characters) is never stored,
so it is answered 404 without asking the inbox (PostgreSQL would refuse a NUL in the query).
A missing or wrong token is a 401 problem (the token is compared in constant time); any other
method is a 405 problem. Once this process's handler has failed on the
event, the document also carries ``"handler_failures": <int>`` (how many times: a poison message
shows here instead of only as a stream of 503s). ``effects`` is the
number of times the event's effect was applied: the inbox's own count unless an
``effects_counter`` (e.g. one counting rows of the application's effect table) is given.
``deliveries`` is the inbox's delivery count. A record released after a transient failure is
reported as ``in_flight``: not committed, waiting for the sender's retry.

The probe is off unless a token is configured; any receiver, in any language, may implement the
same contract.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import Scope, Send

from receiver.inbox.contract import Inbox, RecordState
from receiver.problems import PROBLEMS, send_json, send_problem
from receiver.schemes.base import is_event_id

__all__ = [
    "DEFAULT_PROBE_PREFIX",
    "EffectsCounter",
    "FailureCounter",
    "probe_document",
    "serve_probe",
]

DEFAULT_PROBE_PREFIX = "/_hookproof/events"

EffectsCounter = Callable[[str], Awaitable[int]]
"""How many times the effect of an event (by id) was applied."""

FailureCounter = Callable[[str], int]
"""How many times the handler failed on an event (by id)."""

_ALLOW = {"allow": "GET, HEAD"}


def _authorized(scope: Scope, token: str) -> bool:
    expected = ("Bearer " + token).encode("latin-1", "replace")
    provided = b""
    for name, value in scope["headers"]:
        if name.lower() == b"authorization":
            provided = value
            break
    return hmac.compare_digest(provided, expected)


async def probe_document(
    inbox: Inbox,
    event_id: str,
    effects_counter: EffectsCounter | None = None,
    failures: FailureCounter | None = None,
) -> dict[str, Any] | None:
    """The probe's answer for one event, or ``None`` when the inbox does not know it."""
    record = await inbox.lookup(event_id)
    if record is None:
        return None
    effects = record.effects if effects_counter is None else await effects_counter(event_id)
    status = "committed" if record.state is RecordState.COMMITTED else "in_flight"
    document: dict[str, Any] = {
        "event_id": event_id,
        "status": status,
        "effects": effects,
        "deliveries": record.deliveries,
    }
    failed = 0 if failures is None else failures(event_id)
    if failed:
        document["handler_failures"] = failed
    return document


async def serve_probe(
    scope: Scope,
    send: Send,
    *,
    event_id: str,
    token: str,
    inbox: Inbox,
    effects_counter: EffectsCounter | None = None,
    failures: FailureCounter | None = None,
) -> None:
    """Answer one probe request (the path's ``event_id`` already split off by the caller)."""
    if not _authorized(scope, token):
        await send_problem(
            send,
            PROBLEMS["probe-unauthorized"],
            "send 'Authorization: Bearer <probe token>'",
        )
        return
    if scope["method"] not in ("GET", "HEAD"):
        await send_problem(send, PROBLEMS["method-not-allowed"], "use GET", headers=_ALLOW)
        return
    if not event_id:
        await send_problem(send, PROBLEMS["event-id-required"], "ask for <probe prefix>/<event_id>")
        return
    known = is_event_id(event_id)
    document = await probe_document(inbox, event_id, effects_counter, failures) if known else None
    if document is None:
        await send_problem(
            send, PROBLEMS["event-not-found"], "no copy of this event arrived", event_id=event_id
        )
        return
    await send_json(send, 200, json.dumps(document, separators=(",", ":")).encode("utf-8"))
