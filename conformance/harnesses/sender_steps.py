"""The sender's steps, performed by the sender simulator (``sender_sim``) on a virtual clock.

Sender-level steps — ``policy``, ``publish``, ``attempt``, ``attempt_concurrently``, ``settle``,
``advance``, ``expire_lease``, ``dead_letter``, ``redrive``, ``corrupt_payload`` — run on one
:class:`~sender_sim.Simulator` per scenario. Its HTTP client goes through a
:class:`RecordingTransport`, so every request it sends (and what came back) becomes an
:class:`~conformance.harnesses.exchanges.Exchange` that receiver-side checks read exactly as they
read the runner's own requests. The receiver is whatever the transport forwards to: a scripted one
(S), the reference app in process (R) or a URL (C). Scheduling runs on the virtual clock (six hours
of backoff take no wall time); signatures use the wire clock: real time under R and C (the receiver
checks it), the virtual clock under S. Faults are compiled from the steps into the simulator's
:class:`~sender_sim.FaultPlan`, aimed at one delivery and one attempt number.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from conformance.exceptions import HarnessError
from conformance.harnesses.exchanges import Exchange
from conformance.harnesses.signed_requests import WireRequest
from conformance.harnesses.together import ArriveTogether, GatedCopy, gate_bound
from receiver.clock import FreshWireClock
from receiver.signing import event_id_of
from sender_sim import (
    ExportTooLarge,
    Fault,
    FaultKind,
    FaultPlan,
    FixedSchedule,
    FullJitter,
    Policy,
    RedriveError,
    RedriveScope,
    ResendRefused,
    SimulatorError,
    SQLiteStore,
    VirtualClock,
    policy_named,
)
from sender_sim import Simulator as _Simulator
from sender_sim.sender_client import sender_client

__all__ = [
    "DEFAULT_START",
    "SENDER_ACTIONS",
    "FreshWireClock",
    "RecordingTransport",
    "SenderDriver",
    "compile_policy",
]

DEFAULT_START = datetime(2026, 8, 13, 9, 0, tzinfo=UTC)
ENDPOINT = "target"
OPERATOR = "conformance@hookproof"

Forward = Callable[[httpx.Request, str], Awaitable[httpx.Response]]
"""Sends a request (for the event id given) and returns the answer."""
_CLIENT_HEADERS = frozenset(
    {b"host", b"content-length", b"accept", b"accept-encoding", b"connection"}
)
"""What the HTTP client adds to every request (with its default user agent): not the sender's."""


def _gated(request: httpx.Request, copy: GatedCopy) -> httpx.Request:
    """``request`` with its body held at ``copy``'s gate (same bytes, same Content-Length)."""
    return httpx.Request(
        request.method,
        request.url,
        headers=request.headers,
        content=copy.body(request.content),
        extensions=request.extensions,
    )


class RecordingTransport(httpx.AsyncBaseTransport):
    """Forwards each request and records it, with its answer, under the current ``label``."""

    def __init__(
        self,
        forward: Forward,
        record: Callable[[str, Exchange], None],
        timeout: float,
        *,
        headers: Sequence[tuple[str, bytes]] = (),
    ) -> None:
        self.forward = forward
        self.record = record
        self.timeout = timeout
        self.headers = tuple(headers)
        """Set on every request before it is recorded and sent (the user's ``--header``s)."""
        self.label = "unlabelled"
        self.together: ArriveTogether | None = None
        """While set, each forwarded copy's body waits for the group (concurrent copies)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        for name, value in self.headers:
            request.headers[name] = value.decode("latin-1")
        wire = WireRequest(
            str(request.url),
            tuple(
                (k.decode("latin-1").lower(), v)
                for k, v in request.headers.raw
                if k.lower() not in _CLIENT_HEADERS and not v.startswith(b"python-httpx/")
            ),
            body,
            request.method,
        )
        event_id = event_id_of(request.headers, body)
        label = self.label
        started = time.perf_counter()

        def unanswered(why: str) -> None:
            elapsed = time.perf_counter() - started
            self.record(label, Exchange(wire, None, elapsed, error=why, event_id=event_id))

        copy = None if self.together is None else self.together.copy()
        try:
            async with asyncio.timeout(self.timeout):  # no task per attempt, unlike wait_for
                sent = request if copy is None else _gated(request, copy)
                response = await self.forward(sent, event_id)
        except (TimeoutError, httpx.TimeoutException):
            unanswered(f"no answer within {self.timeout:g} s (timeout)")
            raise httpx.ReadTimeout("no answer within the timeout", request=request) from None
        except httpx.TransportError as error:
            unanswered(f"no answer: {error.__class__.__name__}")
            raise
        finally:
            if copy is not None:
                copy.done()
        content = response.content
        headers = [
            (k, v)
            for k, v in response.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        self.record(
            label,
            Exchange(
                wire,
                response.status_code,
                time.perf_counter() - started,
                {k.lower(): v for k, v in headers},
                content[:65536].decode("utf-8", "replace"),
                event_id=event_id,
            ),
        )
        return httpx.Response(response.status_code, headers=headers, content=content)


def compile_policy(args: Mapping[str, Any], timeout_s: float | None) -> Policy:
    """The simulator policy a ``policy`` step (or the default) describes."""
    policy = policy_named(str(args.get("name", "strict")))
    changes: dict[str, Any] = {}
    if "delays_s" in args:
        changes["backoff"] = FixedSchedule(tuple(timedelta(seconds=s) for s in args["delays_s"]))
    if "jitter_base_s" in args:
        changes["backoff"] = FullJitter(
            timedelta(seconds=args["jitter_base_s"]), timedelta(seconds=args["jitter_cap_s"])
        )
    for key, name in (
        ("expected_attempt_time_s", "expected_attempt_time"),
        ("max_clock_skew_s", "max_clock_skew"),
        ("timeout_s", "timeout"),
    ):
        if key in args:
            changes[name] = timedelta(seconds=args[key])
    if "max_attempts" in args:
        changes["max_attempts"] = int(args["max_attempts"])
    if timeout_s is not None and "timeout_s" not in args:
        changes["timeout"] = timedelta(seconds=timeout_s)
    timeout = changes.get("timeout", policy.timeout)
    if policy.lease_duration <= timeout:
        changes["lease_duration"] = timeout * 2
    return policy.with_(**changes) if changes else policy


@dataclass
class TrackedEvent:
    label: str
    event_id: str
    delivery_id: str
    body: bytes
    attempts_planned: int = 0
    fanned_out: tuple[str, ...] = ()
    """The deliveries a fan-out publication made (``publish_event``)."""
    first_attempt_at: float | None = None
    """When (``time.perf_counter``) its first attempt was dispatched: ``--patience`` counts
    from there."""


@dataclass
class SenderDriver:
    """One scenario's simulator, its events and the record of what the operators were told."""

    transport: RecordingTransport
    url: str
    scheme: str
    secrets: Sequence[str]
    make_body: Callable[[str, str | None, str], bytes]
    new_event_id: Callable[[], str]
    seed: int
    virtual_wire_clock: bool
    timeout_s: float | None = None
    concurrency: int = 4
    patience_s: float = 0.0
    """Real seconds waited before a redrive copy is sent (``--patience``; 0 under S)."""
    events: dict[str, TrackedEvent] = field(default_factory=dict)
    redrive_errors: list[RedriveError] = field(default_factory=list)
    resend_errors: list[ResendRefused] = field(default_factory=list)
    exports: list[int | str] = field(default_factory=list)
    """Each export's row count, or the code it was refused with."""
    start: datetime = DEFAULT_START
    sim: _Simulator | None = None
    clock: VirtualClock | None = None
    _store_dir: tempfile.TemporaryDirectory[str] | None = field(
        default=None, init=False, repr=False
    )
    """The on-disk store's directory, made only for steps that edit the store's file."""

    # -- preparation --------------------------------------------------------------------------

    def prepare(self, steps: Sequence[Any]) -> None:
        """Allocate the events, compile the faults and the policy, and build the simulator."""
        policy_args: Mapping[str, Any] = {}
        faults: list[Fault] = []
        for step in steps:
            args = step.args
            if step.action == "policy":
                policy_args = args
                if "start" in args:
                    self.start = datetime.fromisoformat(args["start"])
            if "event" in args and step.action in SENDER_ACTIONS:
                tracked = self.track(
                    args["event"], args.get("same_body_as"), args.get("body", "template")
                )
                if step.action in ("attempt", "attempt_concurrently", "redrive"):
                    tracked.attempts_planned += 1
                    faults += self._faults_for(step.action, args, tracked)
        self.clock = VirtualClock(self.start)
        # In memory unless a step edits the store's file: no mkdir and rmdir per scenario
        # (on a VM's disk they were the runner's largest own cost of a sender scenario).
        on_disk = any(step.action == "corrupt_payload" for step in steps)
        if on_disk:
            self._store_dir = tempfile.TemporaryDirectory(prefix="hookproof-sender-")
        store = SQLiteStore(self.store_path if on_disk else ":memory:", synchronous="OFF")
        self.sim = _Simulator(
            store,
            clock=self.clock,
            policy=compile_policy(policy_args, self.timeout_s),
            client=sender_client(transport=self.transport),
            seed=self.seed,
            faults=FaultPlan(tuple(faults), self.seed),
            wire_clock=self.clock if self.virtual_wire_clock else FreshWireClock(),
        )
        self.sim.add_endpoint(ENDPOINT, self.url, list(self.secrets), scheme=self.scheme)

    def track(
        self, label: str, same_body_as: str | None = None, body: str = "template"
    ) -> TrackedEvent:
        known = self.events.get(label)
        if known is not None:
            return known
        event_id = self.new_event_id()
        reference = self.events[same_body_as].event_id if same_body_as else None
        tracked = TrackedEvent(
            label, event_id, f"dlv_{event_id}", self.make_body(event_id, reference, body)
        )
        self.events[label] = tracked
        return tracked

    def patience_left(self, tracked: TrackedEvent) -> float:
        """Real seconds still to wait before a redrive copy of ``tracked``: ``--patience``
        since its first attempt (sent before the first scenario, where the step says so)."""
        if self.patience_s <= 0:
            return 0.0
        if tracked.first_attempt_at is None:
            return self.patience_s
        return max(0.0, self.patience_s - (time.perf_counter() - tracked.first_attempt_at))

    def copies_of(self, args: Mapping[str, Any]) -> int:
        """How many concurrent copies an ``attempt_concurrently`` step sends."""
        return int(args.get("copies") or 0) or self.concurrency

    def _faults_for(
        self, action: str, args: Mapping[str, Any], tracked: TrackedEvent
    ) -> list[Fault]:
        ids = frozenset({tracked.delivery_id})
        attempts = frozenset({tracked.attempts_planned})
        faults = []
        if action == "attempt" and args.get("fault"):
            try:
                kind = FaultKind(args["fault"])
            except ValueError:
                raise HarnessError(f"unknown fault {args['fault']!r}") from None
            faults.append(Fault(kind, attempts=attempts, delivery_ids=ids))
        if action == "attempt_concurrently":
            copies = self.copies_of(args)
            faults.append(
                Fault(
                    FaultKind.CONCURRENT_SENDS, copies=copies, attempts=attempts, delivery_ids=ids
                )
            )
        if action == "redrive" and int(args.get("operators", 1)) > 1:
            faults.append(Fault(FaultKind.DOUBLE_REDRIVE, delivery_ids=ids))
        return faults

    @property
    def simulator(self) -> _Simulator:
        if self.sim is None:
            raise HarnessError("the sender steps were not prepared")
        return self.sim

    @property
    def store_path(self) -> Path:
        """The on-disk store's file (only for steps that edit it, see :meth:`prepare`)."""
        if self._store_dir is None:
            raise HarnessError("this scenario's sender store is in memory, not on disk")
        return Path(self._store_dir.name) / "sender.sqlite"

    async def close(self) -> None:
        try:
            if self.sim is not None:
                await self.sim.client.aclose()
                self.sim.store.close() if hasattr(self.sim.store, "close") else None
        finally:
            if self._store_dir is not None:
                self._store_dir.cleanup()
                self._store_dir = None

    # -- helpers the actions share -------------------------------------------------------------

    def now(self) -> datetime:
        return self.simulator.now()

    def when(self, args: Mapping[str, Any], key: str, default_s: float) -> datetime:
        """An absolute time from ``key`` (ISO 8601), ``key_s`` seconds or ``key_us`` µs from now."""
        if key in args:
            return datetime.fromisoformat(str(args[key]))
        offset = timedelta(seconds=float(args.get(f"{key}_s", default_s)))
        offset += timedelta(microseconds=int(args.get(f"{key}_us", 0)))
        return self.now() + offset

    def catch_up(self, tracked: TrackedEvent) -> None:
        """Move the virtual clock to the delivery's due time (or lease expiry) if it is later."""
        delivery = self.simulator.delivery(tracked.delivery_id)
        due = delivery.next_attempt_at or delivery.lease_expires_at
        if due is not None and due > self.now():
            self.simulator.set_time(due)

    async def attempt(
        self, tracked: TrackedEvent, label: str, worker: str = "worker-1", skew_s: float = 0.0
    ) -> None:
        sim = self.simulator
        self.catch_up(tracked)
        chosen = sim.worker(worker, clock_skew=timedelta(seconds=skew_s))
        self.transport.label = label
        if tracked.first_attempt_at is None:
            tracked.first_attempt_at = time.perf_counter()
        leases = chosen.claim(delivery_ids=[tracked.delivery_id])
        chosen.finish([await chosen.dispatch(lease) for lease in leases])


SenderAction = Callable[[SenderDriver, Mapping[str, Any]], Awaitable[None]]
SENDER_ACTIONS: dict[str, SenderAction] = {}
"""Sender-level step interpreters, by action name."""


def sender_action(name: str) -> Callable[[SenderAction], SenderAction]:
    def register(fn: SenderAction) -> SenderAction:
        SENDER_ACTIONS[name] = fn
        return fn

    return register


@sender_action("policy")
async def _policy(driver: SenderDriver, args: Mapping[str, Any]) -> None:
    """Compiled in :meth:`SenderDriver.prepare`; nothing happens at run time."""


@sender_action("publish")
async def _publish(driver: SenderDriver, args: Mapping[str, Any]) -> None:
    tracked = driver.track(args["event"], args.get("same_body_as"))
    driver.simulator.publish(
        endpoint_id=ENDPOINT,
        deadline_at=driver.when(args, "deadline", 86_400),
        event_type=str(args.get("type", "hookproof.conformance.ping")),
        business_key=args.get("key"),
        event_id=tracked.event_id,
        body=tracked.body,
        delivery_id=tracked.delivery_id,
    )


@sender_action("attempt")
async def _attempt(driver: SenderDriver, args: Mapping[str, Any]) -> None:
    tracked = driver.track(args["event"])
    await driver.attempt(
        tracked,
        args.get("label", "attempt"),
        args.get("worker", "worker-1"),
        float(args.get("worker_skew_s", 0)),
    )


@sender_action("attempt_concurrently")
async def _attempt_concurrently(driver: SenderDriver, args: Mapping[str, Any]) -> None:
    copies = driver.copies_of(args)
    transport = driver.transport
    # The copies' bodies leave together once every copy's connection is open (no head start).
    transport.together = ArriveTogether(copies, bound_s=gate_bound(transport.timeout))
    try:
        await driver.attempt(driver.track(args["event"]), args.get("label", "copies"))
    finally:
        transport.together = None


@sender_action("settle")
async def _settle(driver: SenderDriver, args: Mapping[str, Any]) -> None:
    tracked = driver.track(args["event"])
    driver.transport.label = args.get("label", "settle")
    await driver.simulator.run_until_settled(delivery_ids=[tracked.delivery_id])


@sender_action("advance")
async def _advance(driver: SenderDriver, args: Mapping[str, Any]) -> None:
    driver.simulator.advance(timedelta(seconds=float(args["seconds"])))


@sender_action("expire_lease")
async def _expire_lease(driver: SenderDriver, args: Mapping[str, Any]) -> None:
    delivery = driver.simulator.delivery(driver.track(args["event"]).delivery_id)
    if delivery.lease_expires_at is None:
        raise HarnessError(f"event {args['event']!r} holds no lease to expire")
    if delivery.lease_expires_at > driver.now():
        driver.simulator.set_time(delivery.lease_expires_at)


@sender_action("dead_letter")
async def _dead_letter(driver: SenderDriver, args: Mapping[str, Any]) -> None:
    """Let the delivery's deadline pass: its next claim is refused and it dead-letters."""
    sim = driver.simulator
    tracked = driver.track(args["event"])
    delivery = sim.delivery(tracked.delivery_id)
    if delivery.deadline_at > driver.now():
        sim.set_time(delivery.deadline_at)
    driver.transport.label = "dead-letter"
    sim.worker("worker-1").claim(delivery_ids=[tracked.delivery_id])


@sender_action("redrive")
async def _redrive(driver: SenderDriver, args: Mapping[str, Any]) -> None:
    sim = driver.simulator
    tracked = driver.track(args["event"])
    omit = set(args.get("omit", ()))
    scope: RedriveScope | None
    if args.get("scope") == "key":
        scope = RedriveScope(business_key=args["key"])
    elif args.get("scope") == "events":
        scope = RedriveScope(
            delivery_ids=tuple(driver.track(label).delivery_id for label in args["events"])
        )
    else:
        scope = RedriveScope(delivery_ids=(tracked.delivery_id,))
    try:
        sim.redrive(
            actor="" if "actor" in omit else str(args.get("actor", OPERATOR)),
            reason="" if "reason" in omit else str(args.get("reason", "conformance redrive")),
            deadline_at=None if "deadline" in omit else driver.when(args, "deadline", 86_400),  # type: ignore[arg-type]
            scope=None if "scope" in omit else scope,
        )
    except RedriveError as error:
        driver.redrive_errors.append(error)
        return
    except SimulatorError as error:
        raise HarnessError(f"the redrive failed: {error}") from None
    if args.get("then_attempt", True):
        await asyncio.sleep(driver.patience_left(tracked))  # real time: the dedupe must last
        await driver.attempt(tracked, args.get("label", "redrive"))


@sender_action("corrupt_payload")
async def _corrupt_payload(driver: SenderDriver, args: Mapping[str, Any]) -> None:
    """Change the stored payload behind the simulator's back, as a bad migration would (there is
    deliberately no API for it): a redrive must notice that the digest no longer matches."""
    import sqlite3

    tracked = driver.track(args["event"])
    with sqlite3.connect(driver.store_path) as db:
        (body,) = db.execute(
            "SELECT body FROM events WHERE event_id = ?", (tracked.event_id,)
        ).fetchone()
        db.execute(
            "UPDATE events SET body = ? WHERE event_id = ?", (bytes(body) + b" ", tracked.event_id)
        )


@sender_action("endpoint")
async def _endpoint(driver: SenderDriver, args: Mapping[str, Any]) -> None:
    """Configure an endpoint (``op``: add, disable, enable, delete; ``id``, default the target;
    ``types``: its subscriptions). An added endpoint lives at ``<url>/<id>``."""
    sim = driver.simulator
    endpoint_id = str(args.get("id", ENDPOINT))
    op = args.get("op", "add")
    if op == "add":
        url = driver.url if endpoint_id == ENDPOINT else f"{driver.url}/{endpoint_id}"
        types = args.get("types")
        sim.add_endpoint(
            endpoint_id,
            url,
            list(driver.secrets),
            scheme=driver.scheme,
            event_types=None if types is None else list(types),
            actor=OPERATOR,
        )
    elif op in ("disable", "enable"):
        sim.set_endpoint_active(endpoint_id, op == "enable", actor=OPERATOR)
    elif op == "delete":
        sim.delete_endpoint(endpoint_id, actor=OPERATOR)
    else:
        raise HarnessError(f"unknown endpoint op {op!r}")


@sender_action("publish_event")
async def _publish_event(driver: SenderDriver, args: Mapping[str, Any]) -> None:
    """Publish the event to every active subscribed endpoint (fan-out); ``copies`` more untracked
    events of the same type follow."""
    sim = driver.simulator
    tracked = driver.track(args["event"])
    event_type = str(args.get("type", "hookproof.conformance.ping"))
    deadline = driver.when(args, "deadline", 86_400)
    result = sim.publish_event(
        event_type=event_type,
        deadline_at=deadline,
        business_key=args.get("key"),
        event_id=tracked.event_id,
        body=tracked.body,
    )
    tracked.fanned_out = result.delivery_ids
    mine = [d for d in result.delivery_ids if sim.delivery(d).endpoint_id == ENDPOINT]
    if mine or result.delivery_ids:
        tracked.delivery_id = (mine or list(result.delivery_ids))[0]
    for n in range(int(args.get("copies", 0))):
        sim.publish_event(event_type=event_type, deadline_at=deadline, data={"copy": n})


@sender_action("resend")
async def _resend(driver: SenderDriver, args: Mapping[str, Any]) -> None:
    """An operator resends the event's delivery (``of: event`` resends the event itself), then
    it is attempted unless ``then_attempt`` is false."""
    sim = driver.simulator
    tracked = driver.track(args["event"])
    target = tracked.event_id if args.get("of") == "event" else tracked.delivery_id
    try:
        result = sim.resend([target], actor=OPERATOR)
    except ResendRefused as refused:
        driver.resend_errors.append(refused)
        return
    queued = (*result.delivery_ids, *result.new_delivery_ids)
    if queued and tracked.delivery_id not in queued:
        tracked.delivery_id = queued[0]
    if args.get("then_attempt", True):
        await driver.attempt(tracked, args.get("label", "resend"))


@sender_action("export")
async def _export(driver: SenderDriver, args: Mapping[str, Any]) -> None:
    """Export every row as CSV; the row count, or the refusal's code, is recorded."""
    import io

    try:
        driver.exports.append(driver.simulator.export_csv(None, io.StringIO()))
    except ExportTooLarge as refused:
        driver.exports.append(refused.code)
