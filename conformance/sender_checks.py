"""The sender-side check catalogue: what the simulator must end with, read from its records.

Each check gets the scenario's recorded exchanges (what the scripted receiver saw) and the
:class:`~conformance.harnesses.sender_steps.SenderDriver` (the simulator's deliveries, attempts,
ledger and redrive decisions). A failure's reproduction is the delivery's ``explain`` story: every
transition in plain words, which is how a sender-side bug is diagnosed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from itertools import pairwise

from conformance.harnesses.sender_steps import SenderDriver
from conformance.harnesses.state import WireRun
from conformance.model import Expectation
from conformance.results import Failure
from sender_sim import RedriveIncomplete, RedriveRefused, ResendRefused

__all__ = ["SENDER_CHECKS"]

SenderCheck = Callable[[WireRun, SenderDriver, Expectation], Awaitable[Failure | None]]
SENDER_CHECKS: dict[str, SenderCheck] = {}
"""Sender-side checks by name."""


def check(name: str) -> Callable[[SenderCheck], SenderCheck]:
    def register(fn: SenderCheck) -> SenderCheck:
        SENDER_CHECKS[name] = fn
        return fn

    return register


def _story(driver: SenderDriver, label: str) -> str:
    return driver.simulator.explain(driver.track(label).delivery_id)


def _fail(driver: SenderDriver, expectation: Expectation, observed: str) -> Failure:
    return Failure(expectation.describe(), observed, _story(driver, expectation.args["event"]))


def _wire(run: WireRun, driver: SenderDriver, label: str) -> list[bytes]:
    event_id = driver.track(label).event_id
    return [
        e.request.body for group in run.exchanges.values() for e in group if e.event_id == event_id
    ]


@check("sender_state")
async def _sender_state(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """The delivery ends in ``state`` (and, for a dead letter, with ``reason``)."""
    delivery = driver.simulator.delivery(driver.track(exp.args["event"]).delivery_id)
    reason = exp.args.get("reason")
    actual_reason = delivery.reason.value if delivery.reason else None
    if delivery.state.value != exp.args["state"] or (reason and actual_reason != reason):
        shown = delivery.state.value + (f" ({actual_reason})" if actual_reason else "")
        return _fail(driver, exp, f"the delivery is {shown}")
    return None


@check("dlq_reason_seen")
async def _dlq_reason_seen(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """The delivery went through the DLQ with ``reason`` (kept after a redrive, for the audit)."""
    delivery = driver.simulator.delivery(driver.track(exp.args["event"]).delivery_id)
    seen = delivery.dlq_reason.value if delivery.dlq_reason else None
    if seen != exp.args["reason"]:
        return _fail(driver, exp, f"last dead-letter reason: {seen}")
    return None


@check("attempt_count")
async def _attempt_count(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """The simulator recorded exactly ``equals`` attempts."""
    attempts = driver.simulator.attempts(driver.track(exp.args["event"]).delivery_id)
    if len(attempts) != int(exp.args["equals"]):
        return _fail(driver, exp, f"{len(attempts)} attempt(s) recorded")
    return None


@check("wire_count")
async def _wire_count(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """The receiver saw exactly ``equals`` requests for the event."""
    seen = len(_wire(run, driver, exp.args["event"]))
    if seen != int(exp.args["equals"]):
        return _fail(driver, exp, f"the receiver saw {seen} request(s)")
    return None


@check("same_event_on_wire")
async def _same_event(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """Every request for the event carried the event's id and the identical body bytes."""
    tracked = driver.track(exp.args["event"])
    bodies = _wire(run, driver, exp.args["event"])
    if not bodies:
        return _fail(driver, exp, "no request reached the receiver")
    if any(body != tracked.body for body in bodies):
        return _fail(driver, exp, "a request carried different body bytes")
    return None


@check("fresh_signatures")
async def _fresh(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """Each attempt was signed afresh: no two distinct attempts share a signature header."""
    event_id = driver.track(exp.args["event"]).event_id
    signature_header = run.options.scheme.signature_header
    signatures = [
        e.request.header(signature_header)
        for group in run.exchanges.values()
        for e in group
        if e.event_id == event_id
    ]
    if len(signatures) < 2:
        return _fail(driver, exp, f"only {len(signatures)} request(s) were sent")
    if len(set(signatures)) != len(signatures):
        return _fail(
            driver, exp, "two attempts carried the same signature (replayed, not re-signed)"
        )
    return None


def _causes(driver: SenderDriver, label: str) -> list[str]:
    return [row.cause for row in driver.simulator.ledger(driver.track(label).delivery_id)]


@check("ledger_has")
async def _ledger_has(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """The ledger records the ``cause`` (a refused stale ack, a lost claim race, …)."""
    causes = _causes(driver, exp.args["event"])
    if exp.args["cause"] not in causes:
        return _fail(driver, exp, "ledger causes: " + ", ".join(causes))
    return None


@check("crash_recorded")
async def _crash_recorded(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """The crashed worker's attempt is kept, marked not acknowledged."""
    attempts = driver.simulator.attempts(driver.track(exp.args["event"]).delivery_id)
    if not any(not a.acked for a in attempts):
        return _fail(driver, exp, "no unacknowledged attempt was recorded")
    return None


@check("redrive_once")
async def _redrive_once(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """Of the redrive decisions on the delivery, exactly one queued it; the others were refused."""
    delivery_id = driver.track(exp.args["event"]).delivery_id
    mine = [d for d in driver.simulator.decisions() if delivery_id in d.delivery_ids]
    queued = [d for d in mine if d.result != "refused"]
    if len(queued) != 1 or len(mine) < 2:
        results = ", ".join(d.result for d in mine) or "none"
        return _fail(driver, exp, f"redrive decisions: {results}")
    return None


@check("redrive_refused")
async def _redrive_refused(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """Every redrive request was turned down: ``incomplete`` (fields missing), or ``refused``
    with the problem ``code``."""
    errors = driver.redrive_errors
    kind = exp.args.get("kind", "refused")
    expected_type = RedriveIncomplete if kind == "incomplete" else RedriveRefused
    if not errors or not all(isinstance(e, expected_type) for e in errors):
        return _fail(driver, exp, f"redrive errors: {[type(e).__name__ for e in errors]}")
    code = exp.args.get("code")
    if code and not all(isinstance(e, RedriveRefused) and code in e.codes for e in errors):
        return _fail(
            driver, exp, f"problem codes: {[sorted(getattr(e, 'codes', [])) for e in errors]}"
        )
    if len(errors) != int(exp.args.get("count", len(errors))):
        return _fail(driver, exp, f"{len(errors)} refusal(s)")
    return None


@check("next_attempt_at")
async def _next_attempt(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """The next attempt is due ``offset_s`` (+ ``offset_us``) after the scenario's start."""
    delivery = driver.simulator.delivery(driver.track(exp.args["event"]).delivery_id)
    expected = driver.start + timedelta(
        seconds=float(exp.args.get("offset_s", 0)), microseconds=int(exp.args.get("offset_us", 0))
    )
    if delivery.next_attempt_at != expected:
        shown = delivery.next_attempt_at.isoformat() if delivery.next_attempt_at else "none"
        return _fail(driver, exp, f"next attempt due {shown}, expected {expected.isoformat()}")
    return None


@check("retry_not_before")
async def _retry_not_before(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """The retry waits at least ``seconds`` after the attempt that was answered."""
    delivery_id = driver.track(exp.args["event"]).delivery_id
    delivery = driver.simulator.delivery(delivery_id)
    last = driver.simulator.attempts(delivery_id)[-1]
    due = delivery.next_attempt_at
    if due is None or due - last.ended_at < timedelta(seconds=float(exp.args["seconds"])):
        return _fail(driver, exp, f"next attempt due {due.isoformat() if due else 'never'}")
    return None


@check("attempt_offsets")
async def _attempt_offsets(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """Attempts started at exactly these offsets (seconds) from the scenario's start."""
    attempts = driver.simulator.attempts(driver.track(exp.args["event"]).delivery_id)
    offsets = [(a.started_at - driver.start).total_seconds() for a in attempts]
    if offsets != [float(x) for x in exp.args["offsets_s"]]:
        return _fail(driver, exp, f"attempts started at offsets {offsets} s")
    return None


@check("jitter_bounds")
async def _jitter_bounds(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """Each retry is due within ``[0, min(cap, base·2^(n-1))]`` after attempt ``n`` ended."""
    attempts = driver.simulator.attempts(driver.track(exp.args["event"]).delivery_id)
    base = timedelta(seconds=float(exp.args["base_s"]))
    cap = timedelta(seconds=float(exp.args["cap_s"]))
    if len(attempts) < 3:
        return _fail(driver, exp, f"only {len(attempts)} attempts: too few to judge")
    for made, (before, after) in enumerate(pairwise(attempts), start=1):
        gap = after.started_at - before.ended_at
        ceiling = min(cap, base * (2 ** (made - 1)))
        if not timedelta(0) <= gap <= ceiling:
            return _fail(
                driver, exp, f"after attempt {made} the delay was {gap} (ceiling {ceiling})"
            )
    return None


@check("explains")
async def _explains(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """``explain`` tells every ledger row in words (no row falls back to raw data)."""
    delivery_id = driver.track(exp.args["event"]).delivery_id
    ledger = driver.simulator.ledger(delivery_id)
    text = driver.simulator.explain(delivery_id)
    raw = [row.cause for row in ledger if f"{row.cause}: {{" in text]
    if not ledger or raw:
        return _fail(driver, exp, f"transitions not explained in words: {raw or 'empty ledger'}")
    return None


@check("decision_by")
async def _decision_by(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """A queued redrive decision by ``actor`` covers the delivery, and only the ``key`` given."""
    delivery_id = driver.track(exp.args["event"]).delivery_id
    mine = [
        d
        for d in driver.simulator.decisions()
        if delivery_id in d.delivery_ids and d.actor == exp.args["actor"] and d.result != "refused"
    ]
    if len(mine) != 1:
        return _fail(driver, exp, f"{len(mine)} queued decision(s) by {exp.args['actor']}")
    others = [d for d in mine[0].delivery_ids if d != delivery_id]
    if others and not exp.args.get("others_allowed", False):
        return _fail(driver, exp, f"the decision also queued {others}")
    return None


def _plain_fail(expectation: Expectation, observed: str) -> Failure:
    """A failure with no delivery story to tell (event-only events, exports)."""
    return Failure(expectation.describe(), observed, "")


@check("deliveries_to")
async def _deliveries_to(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """The event has exactly one delivery to each endpoint in ``endpoints`` (and no other)."""
    event_id = driver.track(exp.args["event"]).event_id
    found = sorted(d.endpoint_id for d in driver.simulator.store.event_deliveries(event_id))
    if found != sorted(exp.args["endpoints"]):
        return _plain_fail(exp, f"deliveries to {found}")
    return None


@check("event_status")
async def _event_status(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """The event's event-only ``status`` (``none``: it has deliveries), with no attempt made up."""
    tracked = driver.track(exp.args["event"])
    event = driver.simulator.event(tracked.event_id)
    status = event.status.value if event.status else "none"
    if status != exp.args["status"]:
        return _plain_fail(exp, f"the event's status is {status}")
    if event.status and driver.simulator.store.event_deliveries(tracked.event_id):
        return _plain_fail(exp, "an event-only event has deliveries")
    return None


@check("resend_refused")
async def _resend_refused(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """Every resend request was refused with the stable ``code`` (and the item's ``reason``)."""
    errors = driver.resend_errors
    if not errors:
        return _fail(driver, exp, "no resend was refused")
    code = exp.args.get("code", ResendRefused.code)
    reason = exp.args.get("reason")
    for error in errors:
        if error.code != code or (reason and reason not in error.ineligible.values()):
            return _fail(driver, exp, f"refused {error.code}: {error.ineligible}")
    return None


@check("export_refused")
async def _export_refused(run: WireRun, driver: SenderDriver, exp: Expectation) -> Failure | None:
    """Every export was refused with ``code`` (no partial file)."""
    if not driver.exports or any(e != exp.args["code"] for e in driver.exports):
        return _plain_fail(exp, f"exports: {driver.exports}")
    return None
