"""Event payloads: the partner's template (or the generic default) turned into exact body bytes.

A template is JSON text in which ``{{event_id}}`` and ``{{occurred_at}}`` are replaced; its bytes
are otherwise sent as written. Under the Stripe-style scheme the event id travels as the body's
top-level ``"id"``, so it is set there. The body never contains the current time of a delivery:
all attempts of one event carry the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from conformance.exceptions import UsageError
from conformance.harnesses.signed_requests import unusual_json
from receiver.commands.files import read_text
from sender_sim.envelope import stripe_event_document

__all__ = [
    "DEFAULT_TEMPLATE",
    "NUL_TEXT",
    "STRIPE_EVENT_TEMPLATE",
    "UTF8_TEXT",
    "PayloadFactory",
    "default_template",
    "load_template",
    "with_note",
]

_PING = "hookproof.conformance.ping"
_REFERENCE = "{{event_id}}"
_NOTE = "a generic event a conformant receiver acknowledges"
"""The generic event's business data (members of its data object), in both templates."""

DEFAULT_TEMPLATE = (
    '{"type":"' + _PING + '","timestamp":"{{occurred_at}}",'
    '"data":{"reference":"' + _REFERENCE + '","note":"' + _NOTE + '"}}'
)
"""The generic event type a conformant receiver must acknowledge (2xx) and apply once."""

_CREATED_MARK = -1  # stands for the {{created}} placeholder (a number, so unquoted) below
STRIPE_EVENT_TEMPLATE = json.dumps(
    stripe_event_document(
        event_id=_REFERENCE,
        event_type=_PING,
        created=_CREATED_MARK,
        data_object={"id": _REFERENCE, "object": _PING, "reference": _REFERENCE, "note": _NOTE},
    ),
    separators=(",", ":"),
).replace(f'"created":{_CREATED_MARK}', '"created":{{created}}')
"""The generic event as a Stripe ``Event`` object, in the sender simulator's one spelling of
that shape (:func:`sender_sim.envelope.stripe_event_document`): a receiver written against
Stripe's SDK may read ``event.data.object`` of any event it gets, and its ``id``, as it may of
every event Stripe sends. The object's ``id`` is the business reference: two distinct events
about one object (``idempotency.distinct-same-body``) share it, so a receiver that deduplicates
on the object rather than on the event loses the second."""

DEFAULT_TEMPLATES: Mapping[str, str] = {"stripe": STRIPE_EVENT_TEMPLATE}
"""The default template of a scheme whose events have a shape of their own; others take
:data:`DEFAULT_TEMPLATE` (the Standard Webhooks payload structure: ``type``, ``timestamp``,
``data``)."""


def default_template(scheme: str) -> str:
    """The template a run of ``scheme`` sends when no ``--event-template`` is given."""
    return DEFAULT_TEMPLATES.get(scheme, DEFAULT_TEMPLATE)


UTF8_TEXT = "Grüße aus Köln — naïve café, 日本語, emoji 🎉"
"""Non-ASCII text sent as raw UTF-8 (never ``\\u`` escaped) in the ``utf8`` body variant."""
NUL_TEXT = "before\x00after"
"""Text holding U+0000, sent as its ``\\u0000`` escape in the ``nul`` body variant."""
_NOTES: Mapping[str, tuple[str, bool]] = {"utf8": (UTF8_TEXT, False), "nul": (NUL_TEXT, True)}
"""The variants that set a note: its text, and whether it is ``\\u``-escaped (JSON's
``ensure_ascii``) or sent as raw UTF-8."""


def with_note(document: Any, note: str) -> Any:
    """``document`` with a top-level ``note`` of ``note`` (the default templates' events have no
    such member): an object gets the member, a list the note as its last item, anything else
    becomes the list of both."""
    if isinstance(document, dict):
        return {**document, "note": note}
    if isinstance(document, list):
        return [*document, note]
    return [document, note]


def load_template(path: str | Path) -> str:
    """Read and validate a template file; a missing or non-JSON file is a :class:`UsageError`."""
    text = read_text(path, "the event template", UsageError)
    PayloadFactory(text).body("evt_check")
    return text


@dataclass(frozen=True)
class PayloadFactory:
    """Makes the body of an event from the template, per scheme."""

    template: str = DEFAULT_TEMPLATE
    id_in_body: bool = False
    occurred_at: str = "2026-01-01T00:00:00.000000Z"

    @property
    def created(self) -> int:
        """``{{created}}``: ``occurred_at`` in Unix seconds (Stripe's ``created``)."""
        return int(datetime.fromisoformat(self.occurred_at).timestamp())

    def _document(self, event_id: str) -> tuple[str, Any]:
        text = (
            self.template.replace("{{event_id}}", event_id)
            .replace("{{occurred_at}}", self.occurred_at)
            .replace("{{created}}", str(self.created))
        )
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise UsageError(
                f"the event template is not JSON: {error.msg} at line {error.lineno}"
            ) from None
        except (ValueError, RecursionError):  # nested past the stack, a number too long
            raise UsageError("the event template is not JSON: nested too deeply") from None
        if self.id_in_body and not isinstance(document, dict):
            raise UsageError("the event template must be a JSON object for the stripe scheme")
        return text, document

    def body(
        self, event_id: str, *, variant: str = "template", reference: str | None = None
    ) -> bytes:
        """The body bytes. ``variant`` ``unusual`` renders the same document as odd-but-valid
        JSON; ``utf8`` sets a top-level ``note`` to :data:`UTF8_TEXT` in raw UTF-8 (a list gets
        it as a last item), ``nul`` to :data:`NUL_TEXT` with its ``\\u0000`` escape;
        ``reference`` fixes the business data so that two events get identical bodies."""
        text, document = self._document(reference or event_id)
        if self.id_in_body:
            document = {"id": event_id, **{k: v for k, v in document.items() if k != "id"}}
            text = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
        if variant == "invalid":
            return b'{"type": "truncated", "data": '
        if variant == "unusual":
            return unusual_json(document)
        if variant in _NOTES:
            note, escaped = _NOTES[variant]
            noted = with_note(document, note)
            return json.dumps(noted, separators=(",", ":"), ensure_ascii=escaped).encode()
        if variant != "template":
            raise UsageError(f"unknown body variant {variant!r}")
        return text.encode("utf-8")
