"""The per-scenario state every harness shares: the run's options, its events and exchanges.

:class:`WireOptions` is what a harness knows about the endpoint and the run; :class:`WireRun` is
one scenario's state under it — the events it made up (id and body), every exchange recorded (the
runner's own requests and the sender simulator's), the remarks its result makes and the values
to redact — plus the signing and sending of one request. The HTTP harness
(:mod:`conformance.harnesses.http`) and the simulated one (:mod:`conformance.harnesses.simulated`)
both build a ``WireRun``; the checks (:mod:`conformance.checks`, :mod:`conformance.sender_checks`)
only read it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import random
import secrets as secrets_module
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from conformance import receiver_clock
from conformance.deadline import request_within
from conformance.exceptions import DeadlineExceeded, HarnessError
from conformance.extra_headers import RequestHeaders
from conformance.harnesses.exchanges import Exchange
from conformance.harnesses.settling import EffectLag, settled_reading, shown_after
from conformance.harnesses.signed_requests import (
    MUTATIONS,
    WireRequest,
    WireScheme,
    canonical_name,
    tamper,
    with_charset,
)
from conformance.harnesses.together import GatedCopy
from conformance.payloads import PayloadFactory
from conformance.probe import Probe, ProbeSnapshot
from conformance.receiver_clock import ClockOffset
from receiver.clock import next_fresh_second
from receiver.redaction import url_credentials
from receiver.signing import Secret
from sender_sim.wire import tls_failure

if TYPE_CHECKING:
    from conformance.harnesses.sender_steps import SenderDriver

__all__ = ["HUNG_UP", "EventOnWire", "RateLimiter", "WireOptions", "WireRun"]

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
    answers: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """The refusal codes the platform relies on (:mod:`conformance.answers`)."""
    patience: float = 0.0
    """Seconds of real time waited before a late duplicate and a redrive copy (``--patience``)."""
    settle: float = 0.0
    """Seconds a committed event's effects may take to show on the probe (``--settle``;
    :mod:`conformance.harnesses.settling`)."""
    max_body: int | None = None
    """The body limit the receiver declares (``--max-body``); ``None``: not declared."""
    headers: tuple[tuple[str, str], ...] = ()
    """The user's ``--header`` values (:mod:`conformance.extra_headers`)."""
    clock: ClockOffset = field(default_factory=ClockOffset)
    """The receiver's clock against ours, as its first answer's ``Date`` told it; every signed
    timestamp follows ``clock.followed`` (:mod:`conformance.receiver_clock`)."""
    nonce: str = field(default_factory=lambda: secrets_module.token_hex(4))

    @functools.cached_property
    def url_secrets(self) -> frozenset[str]:
        """The target URL's credentials (:mod:`receiver.redaction`), scrubbed from answers."""
        return frozenset(url_credentials(self.url))

    @functools.cached_property
    def request_headers(self) -> RequestHeaders:
        """The unsigned headers of every webhook: the platform's with the user's applied."""
        return self.scheme.request_headers(self.headers)


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
    driver: SenderDriver | None = None
    sensitive: set[str] = field(default_factory=set)
    probe_client: httpx.AsyncClient | None = None
    """The probe's own client (its own connection pool); ``None``: the webhooks' client."""
    copies_client: httpx.AsyncClient | None = None
    """The client of every copy of an event the receiver already acknowledged: one connection
    per request (``None``: the webhooks' client). See :meth:`http_for`."""
    acknowledged: set[str] = field(default_factory=set)
    """The event ids some copy of which was answered 2xx."""
    observations: dict[str, list[tuple[Exchange, ProbeSnapshot]]] = field(default_factory=dict)
    """Probe readings taken the moment a 2xx came back, by label (staggered copies)."""
    first_sent: dict[str, float] = field(default_factory=dict)
    """When each event id's first copy was sent (``perf_counter``): duplicates report the gap."""
    effect_lag: EffectLag = field(default_factory=EffectLag)
    """How late this run's effects showed (shared by the run's scenarios)."""
    remarks: dict[str, str] = field(default_factory=dict)
    """What the scenario's result says besides its verdict, one sentence per kind."""
    other_secret_signatures: set[bytes] = field(default_factory=set)
    """The signature headers of requests signed with another secret than the first (a run
    given several): a refusal of one points at rotation when ``signature.each-secret`` fails."""
    _signed_count: int = 0
    _counter: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def probe_http(self) -> httpx.AsyncClient:
        """The client the probe is read through: a receiver that closes its connections after a
        500 then cannot make the probe's read fail."""
        return self.probe_client if self.probe_client is not None else self.client

    async def effect_shown_after(self, event_id: str, at_least: int = 1) -> float | None:
        """Seconds until ``event_id`` showed ``at_least`` effects, read again for up to a second
        (``None``: they did not, or the run stopped following failures whose effects never
        show): what a failure's report says (:mod:`conformance.harnesses.settling`)."""
        return await shown_after(
            self._probe_reader(event_id), at_least=at_least, lag=self.effect_lag
        )

    async def read_probe(
        self, event_id: str, *, at_least: int = 0, confirm: bool = False
    ) -> ProbeSnapshot:
        """What the probe says about ``event_id``. ``at_least``: a committed event is read again
        (up to ``--settle``) until it shows that many effects; ``confirm``: a reading that must
        not show more is taken once more when this run's effects are known to lag its answers
        (:mod:`conformance.harnesses.settling`)."""
        return await settled_reading(
            self._probe_reader(event_id),
            at_least=at_least,
            confirm=confirm,
            settle_s=self.options.settle,
            lag=self.effect_lag,
            remarks=self.remarks,
        )

    def _probe_reader(self, event_id: str) -> Callable[[], Awaitable[ProbeSnapshot]]:
        """One probe reading of ``event_id`` per call, within the run's rate limit."""
        probe = self.options.probe
        if probe is None:
            raise HarnessError("no probe to read")

        async def read() -> ProbeSnapshot:
            await self.limiter.wait()
            return await probe.read(self.probe_http, event_id, self.options.timeout)

        return read

    def http_for(self, event_id: str) -> httpx.AsyncClient:
        """The client a request for ``event_id`` goes through. A copy of an event the receiver
        already acknowledged leaves on a connection of its own, as a retry from another of the
        sender's machines would: on a kept-alive connection it would reach the worker process
        that acknowledged the event every time, and a receiver that deduplicates in each
        process's memory (a module-level set behind several workers) would pass. Copies of an
        event not yet acknowledged (a forged one, then the genuine) share the pool, so that what
        the first left in a process's memory is met by the next."""
        if self.copies_client is not None and event_id in self.acknowledged:
            return self.copies_client
        return self.client

    def _keep(self, label: str, exchange: Exchange) -> None:
        if exchange.status is not None and 200 <= exchange.status < 300 and exchange.event_id:
            self.acknowledged.add(exchange.event_id)
        self.exchanges.setdefault(label, []).append(exchange)

    # -- events -------------------------------------------------------------------------------

    def new_event_id(self) -> str:
        slug = self.scenario_id.replace(".", "-")
        return f"{self._id_prefix}{slug}_{next(self._counter)}"

    @property
    def _id_prefix(self) -> str:
        return f"evt_hp_{self.options.nonce}_"

    def event(
        self,
        label: str,
        *,
        same_body_as: str | None = None,
        body: str = "template",
        id_case_of: str | None = None,
    ) -> EventOnWire:
        """The event called ``label`` in this scenario (made on first use); with
        ``id_case_of``, its id is that event's id with the case of every letter after the
        run's prefix swapped: another id that only a case-insensitive store would confuse."""
        known = self.events.get(label)
        if known is not None:
            return known
        if id_case_of is not None:
            prefix, original = self._id_prefix, self.event(id_case_of).event_id
            event_id = prefix + original[len(prefix) :].swapcase()
        else:
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
            int(receiver_clock.local_now()) + self.options.clock.followed + skew,
            event.last_timestamp,
            fresh=fresh and skew == 0,
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
        secret_index: int | None = None,
        body: bytes | None = None,
    ) -> WireRequest:
        scheme = self.options.scheme
        body = event.body if body is None else body
        timestamp = self.timestamp(event, skew, fresh=True)
        if mutation in ("wrong-secret", "secret-hint"):
            secret = _wrong_secret(scheme, self.rng)
        else:
            secret = self.next_secret() if secret_index is None else scheme.secrets[secret_index]
        headers = scheme.sign(body, event_id=event.event_id, timestamp=timestamp, secrets=[secret])
        if secret is not scheme.secrets[0] and mutation not in ("wrong-secret", "secret-hint"):
            self.other_secret_signatures.add(headers[scheme.signature_header].encode("latin-1"))
        if mutation.startswith("listed:"):
            headers = scheme.listed(
                headers,
                position=mutation.removeprefix("listed:"),
                body=body,
                event_id=event.event_id,
                timestamp=timestamp,
                rng=self.rng,
            )
        elif mutation in ("rotation", "unknown-version"):
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
        elif mutation == "secret-hint":  # signed with another secret, and saying which
            headers = scheme.scheme.with_secret_hint(headers, secret=secret)
        elif mutation == "garbled":
            headers = {**headers, scheme.signature_header: scheme.scheme.garbled_signature}
        elif mutation.startswith("missing:"):
            headers, body = scheme.drop(mutation.removeprefix("missing:"), headers, body)
        elif mutation not in MUTATIONS:
            raise HarnessError(f"unknown mutation {mutation!r}")
        self.sensitive.update(scheme.signatures_of(headers))
        wire_headers = [*self.options.request_headers.pairs]
        wire_headers += [(k, v.encode("latin-1")) for k, v in headers.items()]
        if mutation == "canonical-names":
            wire_headers = [(canonical_name(k), v) for k, v in wire_headers]
        if mutation == "charset":
            given = dict(wire_headers).get("content-type")
            wire_headers = [(k, v) for k, v in wire_headers if k != "content-type"]
            wire_headers.insert(0, ("content-type", with_charset(given)))
        if attempt is not None:
            wire_headers += [
                ("hookproof-delivery-id", f"dlv_{event.event_id}".encode()),
                ("hookproof-attempt", str(attempt).encode()),
            ]
        return WireRequest(self.options.url, tuple(wire_headers), body)

    def next_secret(self) -> Secret:
        """The run's secrets in turn, starting at a place fixed by the scenario: with several
        secrets, every family's deliveries are signed with each of them (a receiver that only
        tries its first secret breaks rotation)."""
        secrets = self.options.scheme.secrets
        start = zlib.crc32(self.scenario_id.encode())
        chosen = secrets[(start + self._signed_count) % len(secrets)]
        self._signed_count += 1
        return chosen

    def gap(self, event_id: str, now: float) -> float | None:
        """Seconds of real time since ``event_id``'s first copy was sent (``None``: first)."""
        if not event_id:
            return None
        first = self.first_sent.setdefault(event_id, now)
        return now - first if now > first else None

    async def send(
        self,
        label: str,
        request: WireRequest,
        event_id: str = "",
        *,
        together: GatedCopy | None = None,
    ) -> Exchange:
        """Send ``request`` and keep the exchange under ``label``; a copy of a group sent
        ``together`` (:mod:`conformance.harnesses.together`) holds its body until the group is
        ready."""
        request = self.options.scheme.agreeing(request)
        try:
            await self.limiter.wait()
            return await self._send(label, request, event_id, together)
        finally:
            if together is not None:
                together.done()

    async def send_and_hang_up(self, label: str, request: WireRequest, event_id: str) -> Exchange:
        """Send ``request`` and close its connection the moment the whole request is written,
        before any answer: a sender whose timeout passed, or that crashed, and never learns the
        answer (a lost acknowledgement). The exchange kept under ``label`` says so. Where no
        connection carries the request (an app in process, httpx's ASGI transport) there is
        nothing to hang up: the answer is kept as the receiver gave it."""
        request = self.options.scheme.agreeing(request)
        await self.limiter.wait()
        written = asyncio.Event()

        async def trace(name: str, info: Mapping[str, Any]) -> None:
            if name.endswith(".send_request_body.complete"):
                written.set()

        started = time.perf_counter()
        sending = asyncio.ensure_future(
            self._send(label, request, event_id, None, extensions={"trace": trace})
        )
        waiting = asyncio.ensure_future(written.wait())
        try:
            await asyncio.wait({sending, waiting}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
        if sending.done():  # answered before the whole request was written: kept as it came
            return sending.result()
        sending.cancel()  # httpcore closes a connection whose answer was not read
        with contextlib.suppress(asyncio.CancelledError):
            await sending
        exchange = Exchange(
            request,
            None,
            time.perf_counter() - started,
            error=HUNG_UP,
            event_id=event_id,
            gap_s=self.gap(event_id, started),  # _send noted its first copy's time already
        )
        self._keep(label, exchange)
        return exchange

    async def _send(
        self,
        label: str,
        request: WireRequest,
        event_id: str,
        together: GatedCopy | None,
        *,
        extensions: Mapping[str, Any] | None = None,
    ) -> Exchange:
        started = time.perf_counter()
        client = self.http_for(event_id)
        gap = self.gap(event_id, started)
        timeout = self.options.timeout
        headers = request.httpx_headers()
        content: bytes | AsyncIterator[bytes] = request.body
        if together is not None:
            headers.append((b"content-length", str(len(request.body)).encode()))
            content = together.body(request.body)
        try:
            response = await request_within(
                client,
                request.method,
                request.url,
                headers=headers,
                content=content,
                within_s=timeout,
                extensions=extensions,
                max_bytes=BODY_LIMIT,
            )
        except httpx.LocalProtocolError as error:
            raise HarnessError(f"the runner built an invalid request: {error}") from None
        except DeadlineExceeded as late:
            exchange = Exchange(
                request,
                None,
                time.perf_counter() - started,
                error=late.describe(),
                event_id=event_id,
                gap_s=gap,
                late=True,
            )
        except httpx.HTTPError as error:
            exchange = Exchange(
                request,
                None,
                time.perf_counter() - started,
                error=_no_answer(error, len(request.body)),
                event_id=event_id,
                gap_s=gap,
            )
        else:
            exchange = Exchange(
                request,
                response.status_code,
                time.perf_counter() - started,
                {k.lower(): v for k, v in response.headers.items()},
                response.content[:BODY_LIMIT].decode("utf-8", "replace"),
                event_id=event_id,
                gap_s=gap,
            )
        self._keep(label, exchange)
        return exchange

    def record(self, label: str, exchange: Exchange) -> None:
        """Keep an exchange the sender simulator made (and remember its signatures to redact)."""
        headers = {k: v.decode("latin-1") for k, v in exchange.request.headers}
        self.sensitive.update(self.options.scheme.signatures_of(headers))
        gap = self.gap(exchange.event_id, time.perf_counter() - exchange.latency_s)
        if gap is not None:
            exchange = dataclasses.replace(exchange, gap_s=gap)
        self._keep(label, exchange)

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
            credentials=self.options.request_headers.credentials,
            clear_fields=self.options.scheme.scheme.clear_fields,
        )

    def redactions(self) -> set[str]:
        if self.options.show_secrets:
            return set()
        secrets = {s.value for s in self.options.scheme.secrets}
        headers = self.options.request_headers.secret_values()
        return self.sensitive | secrets | headers | self.options.url_secrets


def _wrong_secret(scheme: WireScheme, rng: random.Random) -> Secret:
    wrong: Secret = scheme.scheme.mint_secret(bytes(rng.getrandbits(8) for _ in range(24)))
    return wrong


HUNG_UP = "hung up by the runner once the whole request was sent, before any answer"
"""What the exchange of a copy the runner hung up on says (:meth:`WireRun.send_and_hang_up`)."""

_EARLY_CLOSE_BYTES = 64 * 1024
"""A body this large may still be in flight when a receiver answers early and closes."""


_NO_ANSWER_WORDS: tuple[tuple[type[httpx.HTTPError], str], ...] = (
    (
        httpx.RemoteProtocolError,
        "the connection closed without a complete answer (a crash the server survived by "
        "dropping the connection: Go's net/http does so after a panic)",
    ),
    (httpx.ReadError, "the connection was reset while the answer was awaited"),
    (httpx.WriteError, "the connection was reset while the request was sent"),
    (httpx.ConnectError, "the connection could not be opened"),
)
"""What each kind of transport failure says about the receiver, first match wins."""


def _no_answer(error: httpx.HTTPError, body_bytes: int) -> str:
    """Why an exchange has no answer, saying so when the connection died under a large body:
    a receiver that answers early (a 413) and closes without reading the rest loses its answer
    to the TCP reset, and a sender sees a network error, not the refusal."""
    words = tls_failure(error) or next(
        (words for kind, words in _NO_ANSWER_WORDS if isinstance(error, kind)),
        "the request failed",
    )
    said = f"no answer: {error.__class__.__name__}: {words}"
    closed = isinstance(error, httpx.WriteError | httpx.ReadError | httpx.RemoteProtocolError)
    if closed and body_bytes >= _EARLY_CLOSE_BYTES:
        said += (
            f" — the connection closed while the {body_bytes}-byte body was being sent: if the "
            "receiver answered early (413) and closed without reading the rest, the TCP reset "
            "lost that answer; read (drain) the body or linger before closing"
        )
    return said
