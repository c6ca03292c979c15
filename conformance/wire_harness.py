"""The wire harness (R and C): each step becomes the signed HTTP request a receiver would see.

The same interpreter serves both harnesses; only the ``httpx.AsyncClient`` differs (an
``ASGITransport`` for an app in process, real HTTP for a URL). Wire-level steps (``deliver`` and
its mutations, fuzzed headers, identical concurrent copies, latency samples) are looked up in
:data:`ACTIONS`; sender-level steps (``publish``, ``attempt``, ``redrive`` …) are performed by the
sender simulator through a recording transport (:mod:`conformance.sender_driver`), so that six
hours of backoff run on its virtual clock while the signatures carry real time. Expectations are
judged by :data:`conformance.checks.RECEIVER_CHECKS` from the recorded exchanges and the probe.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import secrets as secrets_module
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from conformance.exceptions import HarnessError
from conformance.exchange import Exchange
from conformance.model import Harness, Scenario, Side
from conformance.payloads import PayloadFactory
from conformance.probe import Probe
from conformance.results import Failure, Outcome, ScenarioResult
from conformance.wire import WireRequest, WireScheme, tamper
from receiver.clock import next_fresh_second
from receiver.signing import Secret

if TYPE_CHECKING:
    from conformance.sender_driver import SenderDriver

__all__ = ["ACTIONS", "WireHarness", "WireOptions", "WireRun", "action"]

BODY_LIMIT = 64 * 1024


@dataclass(frozen=True)
class WireOptions:
    """Everything the wire harness needs to know about the endpoint and the run."""

    url: str
    scheme: WireScheme
    probe: Probe | None = None
    timeout: float = 5.0
    tolerance: int = 300
    margin: int = 10
    concurrency: int = 8
    samples: int = 20
    seed: int = 0
    payloads: PayloadFactory = field(default_factory=PayloadFactory)
    show_secrets: bool = False
    rate_limit: float | None = None
    nonce: str = field(default_factory=lambda: secrets_module.token_hex(4))


class RateLimiter:
    """At most ``rate`` requests per second across the run (a real-time limit, user-chosen)."""

    def __init__(self, rate: float | None) -> None:
        self.interval = 1.0 / rate if rate else 0.0
        self._next = 0.0
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        if not self.interval:
            return
        async with self._lock:
            now = time.monotonic()
            delay = self._next - now
            self._next = max(now, self._next) + self.interval
        if delay > 0:
            await asyncio.sleep(delay)  # real-time: the user capped the request rate


@dataclass
class EventOnWire:
    event_id: str
    body: bytes
    last_timestamp: int = 0
    attempts: int = 0


@dataclass
class WireRun:
    """The state of one scenario under the wire harness: its events and every exchange."""

    options: WireOptions
    client: httpx.AsyncClient
    limiter: RateLimiter
    rng: random.Random
    scenario_id: str
    events: dict[str, EventOnWire] = field(default_factory=dict)
    exchanges: dict[str, list[Exchange]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    driver: SenderDriver | None = None
    sensitive: set[str] = field(default_factory=set)
    _counter: itertools.count[int] = field(default_factory=itertools.count)

    # -- events -------------------------------------------------------------------------------

    def new_event_id(self) -> str:
        slug = self.scenario_id.replace(".", "-")
        return f"evt_hp_{self.options.nonce}_{slug}_{next(self._counter)}"

    def event(
        self, label: str, *, same_body_as: str | None = None, body: str = "template"
    ) -> EventOnWire:
        known = self.events.get(label)
        if known is not None:
            return known
        event_id = self.new_event_id()
        if same_body_as is not None:
            reference = self.event(same_body_as).event_id
            payload = self.options.payloads.body(event_id, variant=body, reference=reference)
        else:
            payload = self.options.payloads.body(event_id, variant=body)
        created = EventOnWire(event_id, payload)
        self.events[label] = created
        return created

    # -- signing and sending --------------------------------------------------------------------

    def timestamp(self, event: EventOnWire, skew: int, fresh: bool) -> int:
        # a fresh signature, even within the same second:
        stamp = next_fresh_second(
            int(time.time()) + skew, event.last_timestamp, fresh=fresh and skew == 0
        )
        event.last_timestamp = max(event.last_timestamp, stamp)
        return stamp

    def signed(
        self,
        event: EventOnWire,
        *,
        skew: int = 0,
        mutation: str = "none",
        attempt: int | None = None,
    ) -> WireRequest:
        scheme = self.options.scheme
        body = event.body
        timestamp = self.timestamp(event, skew, fresh=True)
        if mutation == "wrong-secret":
            wrong = _wrong_secret(scheme, self.rng)
            headers = scheme.sign(
                body, event_id=event.event_id, timestamp=timestamp, secrets=[wrong]
            )
        else:
            headers = scheme.sign(body, event_id=event.event_id, timestamp=timestamp)
        if mutation in ("rotation", "unknown-version"):
            headers = scheme.extra_signature(
                headers,
                kind=mutation,
                body=body,
                event_id=event.event_id,
                timestamp=timestamp,
                rng=self.rng,
            )
        elif mutation == "tampered-body":
            body = tamper(body)
        elif mutation.startswith("missing:"):
            headers, body = scheme.drop(mutation.removeprefix("missing:"), headers, body)
        elif mutation not in ("none", "wrong-secret"):
            raise HarnessError(f"unknown mutation {mutation!r}")
        self.sensitive.update(scheme.signatures_of(headers))
        wire_headers = [("content-type", b"application/json")]
        wire_headers += [(k, v.encode("latin-1")) for k, v in headers.items()]
        if attempt is not None:
            wire_headers += [
                ("hookproof-delivery-id", f"dlv_{event.event_id}".encode()),
                ("hookproof-attempt", str(attempt).encode()),
            ]
        return WireRequest(self.options.url, tuple(wire_headers), body)

    async def send(self, label: str, request: WireRequest, event_id: str = "") -> Exchange:
        await self.limiter.wait()
        started = time.perf_counter()
        timeout = self.options.timeout
        try:
            response = await asyncio.wait_for(
                self.client.request(
                    request.method,
                    request.url,
                    headers=request.httpx_headers(),
                    content=request.body,
                    timeout=timeout,
                ),
                timeout,
            )
        except httpx.LocalProtocolError as error:
            raise HarnessError(f"the runner built an invalid request: {error}") from None
        except (TimeoutError, httpx.TimeoutException):
            exchange = Exchange(
                request,
                None,
                time.perf_counter() - started,
                error=f"no answer within {timeout:g} s (timeout)",
                event_id=event_id,
            )
        except httpx.HTTPError as error:
            exchange = Exchange(
                request,
                None,
                time.perf_counter() - started,
                error=f"{error.__class__.__name__}: the request failed",
                event_id=event_id,
            )
        else:
            exchange = Exchange(
                request,
                response.status_code,
                time.perf_counter() - started,
                {k.lower(): v for k, v in response.headers.items()},
                response.content[:BODY_LIMIT].decode("utf-8", "replace"),
                event_id=event_id,
            )
        self.exchanges.setdefault(label, []).append(exchange)
        return exchange

    def record(self, label: str, exchange: Exchange) -> None:
        """Keep an exchange the sender simulator made (and remember its signatures to redact)."""
        headers = {k: v.decode("latin-1") for k, v in exchange.request.headers}
        self.sensitive.update(self.options.scheme.signatures_of(headers))
        self.exchanges.setdefault(label, []).append(exchange)

    def skew(self, args: Mapping[str, Any]) -> int:
        return (
            int(args.get("tolerances", 0)) * self.options.tolerance
            + int(args.get("margins", 0)) * self.options.margin
            + int(args.get("seconds", 0))
        )

    def curl(self, request: WireRequest) -> str:
        return request.curl(
            signature_header=self.options.scheme.signature_header,
            show_secrets=self.options.show_secrets,
        )

    def redactions(self) -> set[str]:
        if self.options.show_secrets:
            return set()
        return self.sensitive | {s.value for s in self.options.scheme.secrets}


def _wrong_secret(scheme: WireScheme, rng: random.Random) -> Secret:
    wrong: Secret = scheme.scheme.mint_secret(bytes(rng.getrandbits(8) for _ in range(24)))
    return wrong


ActionFn = Callable[[WireRun, Mapping[str, Any]], Awaitable[None]]
ACTIONS: dict[str, ActionFn] = {}
"""The wire harness's step interpreters, by action name."""


def action(name: str) -> Callable[[ActionFn], ActionFn]:
    def register(fn: ActionFn) -> ActionFn:
        ACTIONS[name] = fn
        return fn

    return register


@action("deliver")
async def _deliver(run: WireRun, args: Mapping[str, Any]) -> None:
    event = run.event(args["event"], body=args.get("body", "template"))
    request = run.signed(event, skew=run.skew(args), mutation=args.get("mutation", "none"))
    await run.send(args["label"], request, event.event_id)


@action("deliver_fuzzed")
async def _deliver_fuzzed(run: WireRun, args: Mapping[str, Any]) -> None:
    event = run.event(args["event"])
    good = run.signed(event)
    signed = {k: v.decode("latin-1") for k, v in good.headers if k != "content-type"}
    for headers in run.options.scheme.malformed(signed, run.rng, int(args.get("cases", 12))):
        wire = (("content-type", b"application/json"), *headers.items())
        await run.send(
            args["label"], WireRequest(run.options.url, wire, event.body), event.event_id
        )


@action("deliver_many")
async def _deliver_many(run: WireRun, args: Mapping[str, Any]) -> None:
    count = int(args.get("count") or run.options.samples)
    for index in range(count):
        event = run.event(f"sample-{index}")
        await run.send(args["label"], run.signed(event), event.event_id)


@action("deliver_concurrently")
async def _deliver_concurrently(run: WireRun, args: Mapping[str, Any]) -> None:
    event = run.event(args["event"])
    copies = int(args.get("copies") or run.options.concurrency)
    request = run.signed(event)  # identical copies: the same bytes and the same signature
    await asyncio.gather(*(run.send(args["label"], request, event.event_id) for _ in range(copies)))


@action("script")
async def _script(run: WireRun, args: Mapping[str, Any]) -> None:
    """Scripts only the S harness's stand-in receiver; a real receiver answers for itself."""
    run.notes.append("the receiver under test answers for itself (script ignored)")


def _sender_steps(scenario: Scenario) -> bool:
    from conformance.sender_driver import SENDER_ACTIONS

    return any(
        step.action in SENDER_ACTIONS and step.action not in ACTIONS for step in scenario.steps
    )


class WireHarness:
    """Runs receiver-side scenarios over one ``httpx.AsyncClient`` (R or C)."""

    def __init__(self, options: WireOptions, client: httpx.AsyncClient, harness: Harness) -> None:
        self.options = options
        self.client = client
        self.harness = harness
        self.limiter = RateLimiter(options.rate_limit)

    def skip_reason(self, scenario: Scenario) -> str | None:
        if self.options.scheme.name not in scenario.schemes:
            return f"does not apply to the {self.options.scheme.name} scheme"
        if scenario.needs_probe and self.options.probe is None:
            return "needs a probe (--probe, --probe-token) to observe effects"
        return None

    def observed_by(self, scenario: Scenario) -> str | None:
        if not scenario.judges_effects and not scenario.needs_probe:
            return None
        return "probe" if self.options.probe is not None else "status"

    async def run(self, scenario: Scenario) -> ScenarioResult:
        from conformance.checks import RECEIVER_CHECKS, Unjudged

        started = time.perf_counter()
        observed_by = self.observed_by(scenario)

        def result(
            outcome: Outcome, failures: Sequence[Failure] = (), message: str = ""
        ) -> ScenarioResult:
            return ScenarioResult(
                scenario,
                outcome,
                observed_by,
                time.perf_counter() - started,
                tuple(failures),
                message,
                self.harness.value,
            )

        reason = self.skip_reason(scenario)
        if reason is not None:
            return result(Outcome.SKIPPED, message=reason)
        seed = self.options.seed
        run = WireRun(
            self.options,
            self.client,
            self.limiter,
            random.Random(f"{seed}:{scenario.id}"),
            scenario.id,
        )
        failures: list[Failure] = []
        workdir = tempfile.TemporaryDirectory(prefix="hookproof-sender-")
        try:
            driver = self._driver(run, scenario, Path(workdir.name))
            for step in scenario.steps:
                if step.action in ACTIONS:
                    await ACTIONS[step.action](run, step.args)
                else:
                    assert driver is not None
                    from conformance.sender_driver import SENDER_ACTIONS

                    await SENDER_ACTIONS[step.action](driver, step.args)
            for expectation in scenario.expectations_of(Side.RECEIVER):
                verdict = await RECEIVER_CHECKS[expectation.check](run, expectation)
                if isinstance(verdict, Failure):
                    failures.append(verdict)
                elif isinstance(verdict, Unjudged):
                    run.notes.append(verdict.reason)
        except HarnessError as error:
            return result(Outcome.ERROR, message=str(error))
        except Exception as error:  # a runner problem becomes an error outcome, never a crash
            return result(Outcome.ERROR, message=f"{error.__class__.__name__}: {error}")
        finally:
            if run.driver is not None:
                await run.driver.close()
            workdir.cleanup()
        return result(Outcome.FAILED if failures else Outcome.PASSED, failures)

    def _driver(self, run: WireRun, scenario: Scenario, workdir: Path) -> SenderDriver | None:
        """A sender simulator whose requests go to this harness's endpoint, if steps need one."""
        if not _sender_steps(scenario):
            return None
        from conformance.sender_driver import RecordingTransport, SenderDriver

        options = self.options

        async def forward(request: httpx.Request) -> httpx.Response:
            await run.limiter.wait()
            return await run.client.send(request)

        transport = RecordingTransport(forward, run.record, options.timeout)
        driver = SenderDriver(
            transport=transport,
            url=options.url,
            scheme=options.scheme.name,
            secrets=[s.value for s in options.scheme.secrets],
            make_body=lambda eid, ref, variant: options.payloads.body(
                eid, variant=variant, reference=ref
            ),
            new_event_id=run.new_event_id,
            seed=options.seed,
            virtual_wire_clock=False,
            store_dir=workdir,
            timeout_s=options.timeout,
            concurrency=options.concurrency,
        )
        driver.prepare(scenario.steps)
        for label, tracked in driver.events.items():
            run.events[label] = EventOnWire(tracked.event_id, tracked.body)
        run.driver = driver
        return driver
