"""Redrive: an audited operator decision that moves dead letters back to ``scheduled``.

A request names an ``actor``, a ``reason``, a fresh ``deadline_at`` and a :class:`RedriveScope`
(business key, dead-letter reason, endpoint, explicit delivery ids — at least one). Missing any of
them raises :class:`~sender_sim.exceptions.RedriveIncomplete` and records nothing.

A filter scope selects the deliveries that are dead letters *now* (so an earlier redrive of the
same filter, delivered or dead again, never blocks a later batch); when it selects none, the
refusal names the matching deliveries an earlier redrive has queued and that are still pending, so
a second identical request is refused ``not_dead_letter`` on their ledgers. Explicit ids select
those deliveries in whatever state: one that is not a dead letter makes the request ineligible.
Every selected item is revalidated — still a dead letter, its endpoint still exists, is active and
has the same URL, its stored body still hashes to the payload digest recorded at publication, its
envelope is still valid, and an attempt started now fits the new deadline. A batch holds 1–100 items
and is atomic: one ineligible item and nothing is queued; the decision is recorded either way
(``queued`` or ``refused``, with the problems), and each selected delivery's ledger gets the row.
The move itself is a compare-and-set ``dead_letter → scheduled``
(:func:`sender_sim.transitions.redrive`), so two operators cannot both enqueue an item.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sender_sim.envelope import envelope_problem, payload_digest
from sender_sim.exceptions import RedriveIncomplete, RedriveProblem
from sender_sim.records import (
    DeadLetterReason,
    Delivery,
    Endpoint,
    Event,
    State,
    reason_named,
    rfc3339,
)
from sender_sim.store import DeliveryFilter

__all__ = [
    "MAX_BATCH",
    "RedriveResult",
    "RedriveScope",
    "check_request",
    "item_problems",
    "renewal_problems",
]

MAX_BATCH = 100


@dataclass(frozen=True)
class RedriveScope:
    """Which dead letters a redrive concerns; all given criteria must hold."""

    business_key: str | None = None
    reason: DeadLetterReason | None = None
    endpoint_id: str | None = None
    delivery_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.reason is not None and not isinstance(self.reason, DeadLetterReason):
            object.__setattr__(self, "reason", reason_named(self.reason))
        object.__setattr__(self, "delivery_ids", tuple(self.delivery_ids))

    @property
    def is_empty(self) -> bool:
        return (
            self.business_key is None
            and self.reason is None
            and self.endpoint_id is None
            and not self.delivery_ids
        )

    def as_filter(self) -> DeliveryFilter:
        """The deliveries the scope selects: the dead letters now matching its filters, or the
        explicit ids in whatever state."""
        return DeliveryFilter(
            state=None if self.delivery_ids else State.DEAD_LETTER,
            reason=self.reason,
            business_key=self.business_key,
            endpoint_id=self.endpoint_id,
            delivery_ids=self.delivery_ids,
            limit=MAX_BATCH + 1,
        )

    def pending_filter(self) -> DeliveryFilter:
        """The former dead letters matching the filters that an earlier redrive has queued and
        that are still pending (what a repeated request is refused over)."""
        return DeliveryFilter(
            states=(State.SCHEDULED, State.LEASED),
            reason=self.reason,
            business_key=self.business_key,
            endpoint_id=self.endpoint_id,
            ever_dead_lettered=True,
            limit=MAX_BATCH + 1,
        )

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.business_key is not None:
            out["business_key"] = self.business_key
        if self.reason is not None:
            out["reason"] = self.reason.value
        if self.endpoint_id is not None:
            out["endpoint_id"] = self.endpoint_id
        if self.delivery_ids:
            out["delivery_ids"] = list(self.delivery_ids)
        return out


@dataclass(frozen=True)
class RedriveResult:
    """A queued redrive: its decision id and the deliveries now scheduled again."""

    decision_id: int
    delivery_ids: tuple[str, ...]
    deadline_at: datetime
    duplicate_refused: int | None = None
    """The decision id of the duplicate submission refused, when the double-redrive fault fired."""


def check_request(
    actor: object, reason: object, deadline_at: object, scope: RedriveScope | None
) -> None:
    """Raise :class:`RedriveIncomplete` naming every missing field."""
    missing = []
    if not isinstance(actor, str) or not actor.strip():
        missing.append("actor")
    if not isinstance(reason, str) or not reason.strip():
        missing.append("reason")
    if not isinstance(deadline_at, datetime):
        missing.append("fresh deadline")
    if scope is None or scope.is_empty:
        missing.append("scope (business key, reason, endpoint or delivery ids)")
    if missing:
        raise RedriveIncomplete("a redrive needs " + ", ".join(missing))


def item_problems(
    delivery: Delivery,
    *,
    event: Event,
    endpoint: Endpoint | None,
    fits_deadline: bool,
    max_body_bytes: int,
) -> list[RedriveProblem]:
    """Everything that makes one selected delivery ineligible (empty: eligible)."""
    found: list[RedriveProblem] = []
    did = delivery.delivery_id

    def add(code: str, message: str) -> None:
        found.append(RedriveProblem(did, code, message))

    if delivery.state is not State.DEAD_LETTER:
        add(
            "not_dead_letter",
            f"is {delivery.state.value}, not a dead letter"
            + (f" (already redriven {delivery.redrives}x)" if delivery.redrives else ""),
        )
    if endpoint is None:
        add("endpoint_missing", f"endpoint {delivery.endpoint_id!r} no longer exists")
    else:
        if not endpoint.active:
            add("endpoint_inactive", f"endpoint {delivery.endpoint_id!r} is not active")
        if endpoint.url != delivery.destination_url:
            add("destination_changed", "the endpoint's URL changed since publication")
    if payload_digest(event.body) != delivery.payload_digest or event.digest != (
        delivery.payload_digest
    ):
        add("digest_changed", "the stored payload no longer matches its recorded digest")
    elif endpoint is not None:
        problem = envelope_problem(
            event_id=event.event_id,
            event_type=event.type,
            body=event.body,
            scheme=endpoint.scheme,
            max_body_bytes=max_body_bytes,
        )
        if problem:
            add("envelope_invalid", problem)
    if not fits_deadline:
        add("deadline_too_soon", "an attempt started now would not fit the new deadline")
    return found


def renewal_problems(
    delivery: Delivery,
    *,
    endpoint: Endpoint | None,
    signing_fingerprint: str | None,
    deadline_at: datetime,
) -> list[RedriveProblem]:
    """What makes a dead letter ineligible for *this* renewal (empty: eligible): a delivery that
    died of its deadline (``deadline_exhausted``) needs a new deadline later than the one it
    missed, and a secret configured here to sign with must be the endpoint's current credential
    (``signing_fingerprint`` ``None``: none configured, e.g. a queue-only redrive; the worker
    that sends signs with its own). A delivery dead for another reason
    may get a shorter window than the one it had."""
    if delivery.state is not State.DEAD_LETTER:
        return []  # item_problems already refuses it
    found: list[RedriveProblem] = []
    did = delivery.delivery_id
    missed = delivery.reason is DeadLetterReason.DEADLINE_EXHAUSTED
    if missed and deadline_at <= delivery.deadline_at:
        found.append(
            RedriveProblem(
                did,
                "deadline_not_later",
                f"the new deadline {rfc3339(deadline_at)} is not later than the previous one "
                f"{rfc3339(delivery.deadline_at)}",
            )
        )
    if (
        signing_fingerprint is not None
        and endpoint is not None
        and signing_fingerprint != endpoint.secret_fingerprint
    ):
        found.append(
            RedriveProblem(
                did,
                "credential_changed",
                f"the secret configured here is not endpoint {delivery.endpoint_id!r}'s current "
                "credential (its fingerprint changed)",
            )
        )
    return found
