"""Endpoints as configuration: their visible settings, their setup history, and fan-out.

Fan-out (:func:`fan_out`) decides, from the endpoints configured when an event is published,
which of them get a delivery: every active endpoint subscribed to the event's type. When none
does, the event gets the event-only status that says what the publisher saw — no endpoint at all
(``no_endpoint``), none active (``endpoint_disabled``), or none active and subscribed
(``not_subscribed``) — and no attempt is made up. Later endpoints never join an event's
deliveries: retries use the deliveries materialised here.

The setup history (:func:`history_entry`) records every creation, change, disable, enable and
deletion with the actor and the settings before and after; a secret appears only as its
fingerprint, and the URL without its credentials (:func:`~receiver.redaction.shown_url`). A
change of those credentials alone is still a change: its entry says ``url_credentials:
changed``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from receiver.redaction import shown_url
from sender_sim.records import Endpoint, EndpointChange, EventStatus

__all__ = ["fan_out", "history_entry", "settings"]


def settings(endpoint: Endpoint) -> dict[str, Any]:
    """The settings a person may read: never a secret, only its fingerprint; the URL without its
    password or token values."""
    return {
        "url": shown_url(endpoint.url),
        "scheme": endpoint.scheme,
        "active": endpoint.active,
        "timeout_s": endpoint.timeout / timedelta(seconds=1),
        "event_types": None if endpoint.event_types is None else list(endpoint.event_types),
        "secret_fingerprint": endpoint.secret_fingerprint,
    }


def history_entry(
    before: Endpoint | None, after: Endpoint | None, *, at: datetime, actor: str
) -> EndpointChange | None:
    """The setup-history entry for ``before → after`` (``None``: nothing changed)."""
    old = None if before is None else settings(before)
    new = None if after is None else settings(after)
    if old == new:
        if before is None or after is None or before.url == after.url:
            return None
        new = {**settings(after), "url_credentials": "changed"}
    if before is None:
        action = "created"
    elif after is None:
        action = "deleted"
    elif old is not None and new is not None and _only_active_changed(old, new):
        action = "enabled" if new["active"] else "disabled"
    else:
        action = "changed"
    endpoint_id = (after or before).endpoint_id  # type: ignore[union-attr]
    return EndpointChange(endpoint_id, at, actor, action, old, new)


def _only_active_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    return {k for k in old if old[k] != new.get(k)} == {"active"}


def fan_out(
    endpoints: Sequence[Endpoint], event_type: str
) -> tuple[list[Endpoint], EventStatus | None]:
    """The endpoints an event of ``event_type`` goes to, or none and its event-only status."""
    if not endpoints:
        return [], EventStatus.NO_ENDPOINT
    active = [e for e in endpoints if e.active]
    if not active:
        return [], EventStatus.ENDPOINT_DISABLED
    chosen = [e for e in active if e.subscribes(event_type)]
    if not chosen:
        return [], EventStatus.NOT_SUBSCRIBED
    return chosen, None
