"""Resend: the operator's explicit "send it again", next to redrive.

A resend takes 1-100 ids, all or nothing:

- a **delivery id** of a retained delivery that is delivered or a dead letter, whose endpoint still
  exists and is active: one more real attempt of that delivery (:func:`sender_sim.transitions.
  resend`) — even after a 2xx, so the receiver may see the event again and must deduplicate by
  its event id; the lifetime attempt count is kept;
- an **event id** of an event-only event (``no_endpoint``, ``endpoint_disabled``,
  ``not_subscribed``, ``history_unavailable``) or of an event with a dead-letter delivery and
  nothing pending: sent to the endpoints active and subscribed *now* — a dead-letter delivery to
  one of them is resent, an endpoint without one gets a new delivery, a delivered sibling is not
  repeated.

Work that is already pending (scheduled) or in flight (leased) is refused, as is everything else
not eligible: the whole request then queues nothing and raises
:class:`~sender_sim.exceptions.ResendRefused` (``WEBHOOK_DELIVERY_NOT_REPLAYABLE``) naming each
offending id. A resend's deadline is the later of the delivery's (or event's) deadline and
:data:`RESEND_WINDOW` from now, unless the caller gives one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sender_sim.endpoints import fan_out
from sender_sim.policy import Policy
from sender_sim.records import Delivery, Event, State
from sender_sim.redrive import MAX_BATCH
from sender_sim.store import Change, SQLiteStore
from sender_sim.transitions import Step, resend

__all__ = ["RESEND_WINDOW", "ResendPlan", "ResendResult", "plan_resend"]

RESEND_WINDOW = timedelta(hours=1)
"""How long a resend without a deadline of its own has to start (when the old one is past)."""

_BUSY = {State.SCHEDULED: "pending", State.LEASED: "in_flight"}

NewDelivery = Callable[[Event, str, datetime], Step]
"""Make a new delivery step of ``event`` to an endpoint id with a deadline."""


@dataclass(frozen=True)
class ResendResult:
    """What a resend queued: the deliveries resent and the new ones, in request order."""

    delivery_ids: tuple[str, ...]
    new_delivery_ids: tuple[str, ...] = ()
    by_id: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Each requested id and the delivery ids it queued."""


@dataclass
class ResendPlan:
    """The changes a resend would make, or why it cannot."""

    changes: list[Change] = field(default_factory=list)
    inserts: list[Step] = field(default_factory=list)
    clear_status: list[str] = field(default_factory=list)
    ineligible: dict[str, str] = field(default_factory=dict)
    by_id: dict[str, tuple[str, ...]] = field(default_factory=dict)


def _deadline(current: datetime | None, now: datetime, given: datetime | None) -> datetime:
    if given is not None:
        return given
    floor = now + RESEND_WINDOW
    return floor if current is None or current < floor else current


def plan_resend(
    store: SQLiteStore,
    ids: Sequence[str],
    *,
    actor: str,
    now: datetime,
    policy: Policy,
    deadline_at: datetime | None,
    make_delivery: NewDelivery,
) -> ResendPlan:
    """Every change the resend of ``ids`` needs, with the ineligible ids and why."""
    plan = ResendPlan()
    if not 1 <= len(ids) <= MAX_BATCH:
        plan.ineligible[""] = f"a resend takes 1 to {MAX_BATCH} ids, not {len(ids)}"
        return plan
    taken: set[str] = set()
    for item in ids:
        delivery = store.find_delivery(item)
        if delivery is not None:
            _plan_delivery(store, plan, item, delivery, actor, now, policy, deadline_at, taken)
            continue
        event = store.find_event(item)
        if event is None:
            plan.ineligible[item] = "not_found"
            continue
        _plan_event(store, plan, event, actor, now, policy, deadline_at, make_delivery, taken)
    return plan


def _resend_step(
    plan: ResendPlan,
    item: str,
    delivery: Delivery,
    actor: str,
    now: datetime,
    policy: Policy,
    deadline_at: datetime | None,
) -> str | None:
    deadline = _deadline(delivery.deadline_at, now, deadline_at)
    step = resend(delivery, actor=actor, deadline_at=deadline, now=now, policy=policy)
    if step is None:
        plan.ineligible[item] = _BUSY.get(delivery.state, "deadline_too_soon")
        return None
    plan.changes.append(Change(delivery, step.delivery, step.row))
    return delivery.delivery_id


def _plan_delivery(
    store: SQLiteStore,
    plan: ResendPlan,
    item: str,
    delivery: Delivery,
    actor: str,
    now: datetime,
    policy: Policy,
    deadline_at: datetime | None,
    taken: set[str],
) -> None:
    endpoint = store.endpoint(delivery.endpoint_id)
    if endpoint is None:
        plan.ineligible[item] = "endpoint_deleted"
        return
    if not endpoint.active:
        plan.ineligible[item] = "endpoint_disabled"
        return
    if delivery.delivery_id in taken:
        plan.ineligible[item] = "requested_twice"
        return
    queued = _resend_step(plan, item, delivery, actor, now, policy, deadline_at)
    if queued is not None:
        taken.add(queued)
        plan.by_id[item] = (queued,)


def _plan_event(
    store: SQLiteStore,
    plan: ResendPlan,
    event: Event,
    actor: str,
    now: datetime,
    policy: Policy,
    deadline_at: datetime | None,
    make_delivery: NewDelivery,
    taken: set[str],
) -> None:
    item = event.event_id
    retained = store.event_deliveries(item)
    busy = [d for d in retained if d.state in _BUSY]
    if busy:
        plan.ineligible[item] = _BUSY[busy[0].state]
        return
    if event.status is None and not any(d.state is State.DEAD_LETTER for d in retained):
        plan.ineligible[item] = "not_event_only_or_dead_letter"
        return
    targets, status = fan_out(store.endpoints(), event.type)
    if status is not None:
        plan.ineligible[item] = f"no_active_subscriber ({status.value})"
        return
    by_endpoint = {d.endpoint_id: d for d in retained}
    queued: list[str] = []
    for endpoint in targets:
        existing = by_endpoint.get(endpoint.endpoint_id)
        if existing is None:
            step = make_delivery(event, endpoint.endpoint_id, _deadline(None, now, deadline_at))
            if step.delivery.state is not State.SCHEDULED:
                plan.ineligible[item] = "deadline_too_soon"
                return
            plan.inserts.append(step)
            queued.append(step.delivery.delivery_id)
        elif existing.state is State.DEAD_LETTER and existing.delivery_id not in taken:
            did = _resend_step(plan, item, existing, actor, now, policy, deadline_at)
            if did is None:
                return
            taken.add(did)
            queued.append(did)
    if not queued:
        plan.ineligible[item] = "already_delivered_to_every_subscriber"
        return
    if event.status is not None:
        plan.clear_status.append(item)
    plan.by_id[item] = tuple(queued)
