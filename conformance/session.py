"""One check run from settings to summary: build the wire options, open the clients (real HTTP
for a URL, in process for an ASGI app; the probe on a connection pool of its own), wait for the
endpoint, check the probe once, run the engine (within ``max_time``) and feed every event to the
reporters."""

from __future__ import annotations

import dataclasses
import functools
import random
import ssl
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx

from conformance.catalogue import CATALOGUE
from conformance.config import CheckSettings
from conformance.engine import execute
from conformance.events import Event, RunFinished
from conformance.harnesses.http import WireHarness
from conformance.harnesses.signed_requests import WireScheme
from conformance.harnesses.state import WireOptions
from conformance.model import Harness, Scenario
from conformance.payloads import PayloadFactory, default_template, load_template
from conformance.probe import Probe
from conformance.reachability import wait_until_answering
from conformance.receiver_clock import ClockOffset
from conformance.reporters import Reporter
from conformance.results import Summary
from receiver.redaction import shown_url
from receiver.signing import Secret
from sender_sim.sender_client import sender_client

__all__ = [
    "SENDER_SIDE_TARGET",
    "open_http_harness",
    "plan",
    "run_check",
    "run_sender_side",
    "url_client",
    "wire_options",
]

SENDER_SIDE_TARGET = "sender_sim (virtual clock, scripted receiver)"
"""The target a sender-side run reports: the simulator itself, not an endpoint."""


def wire_options(settings: CheckSettings, *, seed: int, nonce: str | None = None) -> WireOptions:
    """The wire harness's options for validated ``settings``."""
    assert settings.url is not None
    scheme = WireScheme(settings.scheme, tuple(Secret(s) for s in settings.secrets))
    template = (
        load_template(settings.event_template)
        if settings.event_template
        else default_template(settings.scheme)
    )
    payloads = PayloadFactory(template, id_in_body=scheme.id_in_body)
    payloads.body("evt_template_check")
    probe = (
        Probe(settings.probe, settings.probe_token, settings.headers)
        if settings.probe and settings.probe_token
        else None
    )
    extra: dict[str, Any] = {"nonce": nonce} if nonce else {}
    options = WireOptions(
        url=settings.url,
        scheme=scheme,
        probe=probe,
        timeout=settings.timeout,
        tolerance=settings.tolerance,
        margin=settings.margin,
        concurrency=settings.concurrency,
        samples=settings.samples,
        seed=seed,
        payloads=payloads,
        show_secrets=settings.show_secrets,
        rate_limit=settings.rate_limit,
        answers=settings.answers,
        patience=settings.patience,
        settle=settings.settle,
        max_body=settings.max_body,
        headers=settings.headers,
        **extra,
    )
    options.request_headers  # noqa: B018 - a --header hookproof cannot send is a usage error now
    return options


def plan(settings: CheckSettings, harness: Harness = Harness.C) -> list[Scenario]:
    """The scenarios ``settings`` select among those tagged for ``harness``, in the order they
    run: the catalogue's, except that a scenario whose first copy is sent before the first
    scenario (a step marked ``early``) runs after all the others, so that the whole run passes
    between its two copies (the late duplicate's gap is the run's length, not half of it)."""
    selected = CATALOGUE.select(settings.select, settings.deselect, harness=harness)
    return sorted(selected, key=lambda scenario: bool(scenario.early_steps))


@functools.cache
def _verified_tls() -> ssl.SSLContext:
    """httpx's default verifying TLS context (its CA bundle, or ``SSL_CERT_FILE``), loaded once
    per process: loading the bundle is tens of milliseconds, once per client otherwise."""
    return httpx.create_ssl_context()


@asynccontextmanager
async def url_client(
    settings: CheckSettings, url: str | None = None, *, keep_alive: bool = True
) -> AsyncIterator[httpx.AsyncClient]:
    """A real HTTP client for ``url`` (default: the endpoint's). A plain ``http://`` target never
    negotiates TLS (the runner follows no redirect), so no CA bundle is loaded for it. Without
    ``keep_alive`` every request opens a connection of its own and closes it after the answer."""
    limits = httpx.Limits(
        max_connections=max(16, settings.concurrency * 2),
        max_keepalive_connections=None if keep_alive else 0,
    )
    target = url if url is not None else settings.url or ""
    tls: ssl.SSLContext | bool = _verified_tls() if target.startswith("https://") else False
    async with sender_client(limits=limits, timeout=settings.timeout, verify=tls) as client:
        yield client


async def run_check(
    settings: CheckSettings,
    reporters: Sequence[Reporter],
    *,
    client: httpx.AsyncClient | None = None,
    harness: Harness = Harness.C,
    nonce: str | None = None,
) -> Summary:
    """Run the selected scenarios against ``settings.url`` and return the summary.

    With ``client`` given (e.g. bound to an ASGI app in process) it is used as is; otherwise a
    real HTTP client is opened and the endpoint must answer first (:class:`EndpointUnreachable`).
    """
    settings = settings.validate()
    seed = _seed(settings)
    options = wire_options(settings, seed=seed, nonce=nonce)
    scenarios = plan(settings, harness)
    async with open_http_harness(settings, options, harness, client=client) as wire:
        await wire.deliver_early(scenarios)
        told = settings.report_options() | {"seed": seed}
        clock_note = wire.options.clock.describe()
        if clock_note is not None:
            told["receiver_clock"] = clock_note
        return await _feed(
            execute(
                scenarios,
                wire,
                target=shown_url(options.url, show_secrets=settings.show_secrets),
                scheme=options.scheme.name,
                probe=options.probe is not None,
                seed=seed,
                max_time=settings.max_time,
                options=told,
            ),
            reporters,
        )


@asynccontextmanager
async def open_http_harness(
    settings: CheckSettings,
    options: WireOptions,
    harness: Harness = Harness.C,
    *,
    client: httpx.AsyncClient | None = None,
) -> AsyncIterator[WireHarness]:
    """The HTTP harness, ready to run scenarios.

    With ``client`` given (e.g. bound to an ASGI app in process) it is used as is, for the probe
    and for copies of acknowledged events too. Otherwise real HTTP clients are opened — one for
    the webhooks, one that sends each copy of an acknowledged event on a connection of its own
    (:meth:`~conformance.harnesses.state.WireRun.http_for`) and one for the probe, so that a
    receiver closing its connections after a 500 cannot break the probe's reads — and the
    endpoint must answer first (:class:`~conformance.exceptions.EndpointUnreachable`). Either
    way a probe is read once before anything else
    (:class:`~conformance.exceptions.ProbeUnusable`: a wrong token is one error, not one per
    scenario), then one lone event tells whether the receiver's effects show after its answers
    (:meth:`~conformance.harnesses.http.WireHarness.learn_effect_lag`).
    """
    async with AsyncExitStack() as stack:
        if client is None:
            client = await stack.enter_async_context(url_client(settings))
            copies_client = await stack.enter_async_context(url_client(settings, keep_alive=False))
            probe_client = (
                await stack.enter_async_context(url_client(settings, options.probe.prefix))
                if options.probe
                else client
            )
            seen = await wait_until_answering(
                client,
                options.url,
                within=settings.wait_for_endpoint,
                answer_within=options.timeout,
            )
            clock = ClockOffset.judge(seen, margin=options.margin, tolerance=options.tolerance)
            options = dataclasses.replace(options, clock=clock)
        else:
            probe_client = copies_client = client
        if options.probe is not None:
            await options.probe.preflight(probe_client, options.timeout)
        wire = WireHarness(
            options, client, harness, probe_client=probe_client, copies_client=copies_client
        )
        stack.push_async_callback(wire.aclose)  # before the clients it sends through close
        await wire.learn_effect_lag()
        yield wire


async def run_sender_side(settings: CheckSettings, reporters: Sequence[Reporter]) -> Summary:
    """Run the selected sender-side (S) scenarios: sender_sim on a virtual clock against a
    scripted in-process receiver. No endpoint is involved; ``settings.url`` is not needed."""
    from conformance.harnesses.simulated import SenderHarness

    seed = _seed(settings)
    scenarios = plan(settings, Harness.S)
    return await _feed(
        execute(
            scenarios,
            SenderHarness(seed=seed),
            target=SENDER_SIDE_TARGET,
            scheme="standard",
            probe=False,
            seed=seed,
            max_time=settings.max_time,
            options=settings.report_options() | {"seed": seed},
        ),
        reporters,
    )


def _seed(settings: CheckSettings) -> int:
    """The run's seed: the one given, or a fresh one (printed in the report, so it replays)."""
    return settings.seed if settings.seed is not None else random.SystemRandom().randrange(10**6)


async def _feed(events: AsyncIterator[Event], reporters: Sequence[Reporter]) -> Summary:
    """Hand every event to every reporter; the run's summary."""
    summary = Summary()
    async for event in events:
        for reporter in reporters:
            reporter.handle(event)
        if isinstance(event, RunFinished):
            summary = event.summary
    return summary
