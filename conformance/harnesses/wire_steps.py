"""The HTTP harness's wire-level steps: ``deliver`` and its mutations, fuzzed headers, identical
concurrent copies and latency samples, each turned into the signed requests a receiver sees.

Each step interpreter is registered in :data:`ACTIONS` by action name; sender-level steps are in
:data:`conformance.harnesses.sender_steps.SENDER_ACTIONS` instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from conformance.answers import RETRY_LATER
from conformance.exceptions import HarnessError
from conformance.harnesses.fuzz_cases import (
    FuzzCase,
    body_cases,
    case_swapped_cases,
    header_cases,
    odd_json_cases,
    repeated_cases,
    truncated_cases,
    wrong_length_cases,
)
from conformance.harnesses.signed_requests import WireRequest, padded
from conformance.harnesses.state import EventOnWire, WireRun
from conformance.harnesses.together import ArriveTogether, gate_bound

__all__ = ["ACTIONS", "REQUIRES", "action"]

ActionFn = Callable[[WireRun, Mapping[str, Any]], Awaitable[None]]
ACTIONS: dict[str, ActionFn] = {}
"""The wire harness's step interpreters, by action name."""


REQUIRES: dict[str, tuple[str, str]] = {
    "deliver_sized": ("max_body", "needs the receiver's body limit (--max-body BYTES)"),
}
"""Actions that need an option the user may not give: the option and the skip reason."""


def action(name: str) -> Callable[[ActionFn], ActionFn]:
    def register(fn: ActionFn) -> ActionFn:
        ACTIONS[name] = fn
        return fn

    return register


@action("deliver")
async def _deliver(run: WireRun, args: Mapping[str, Any]) -> None:
    event = run.event(
        args["event"], body=args.get("body", "template"), id_case_of=args.get("id_case_of")
    )
    request = run.signed(event, skew=run.skew(args), mutation=args.get("mutation", "none"))
    await run.send(args["label"], request, event.event_id)


def _fuzz_cases(
    run: WireRun, event: EventOnWire, kind: str, extra: int, other: str, signed_body: bool
) -> list[FuzzCase]:
    """The structure-aware cases of ``kind`` for ``event`` under the run's scheme (plus
    ``extra`` seeded random ones for ``headers``; ``other`` names the event whose id a repeated
    id header carries; ``signed_body``: bodies signed correctly, not under the genuine one's)."""
    scheme = run.options.scheme
    good = run.signed(event)
    plain = run.options.request_headers.names  # the content type, X-GitHub-Event …
    signed = {k: v.decode("latin-1") for k, v in good.headers if k not in plain}
    stamp = event.last_timestamp
    if kind in ("headers", "unsigned-id"):
        unsigned = kind == "unsigned-id"
        cases = header_cases(scheme.name, signed, event.body, stamp, run.rng, unsigned=unsigned)
        randoms = scheme.malformed(signed, run.rng, extra, unsigned=unsigned)
        return cases + [FuzzCase(f"random#{i}", h, event.body) for i, h in enumerate(randoms)]
    if kind == "wrong-length":
        return wrong_length_cases(scheme.name, signed, event.body, stamp, run.rng)
    if kind == "truncated":

        def truncated(keep: int) -> str:
            return scheme.truncated(event.body, event_id=event.event_id, timestamp=stamp, keep=keep)

        return truncated_cases(signed, event.body, scheme.signature_header, truncated)
    if kind == "case-swapped":
        swapped = scheme.case_swapped(event.body, event_id=event.event_id, timestamp=stamp)
        return case_swapped_cases(signed, event.body, scheme.signature_header, swapped)
    if kind == "odd-json":
        return odd_json_cases(signed)
    if kind == "repeated":
        other_id = run.event(other).event_id
        return repeated_cases(scheme.name, signed, event.body, stamp, run.rng, other_id=other_id)

    def sign(body: bytes) -> dict[str, str]:
        secret = scheme.secrets[0]
        return scheme.sign(body, event_id=event.event_id, timestamp=stamp, secrets=[secret])

    return body_cases(signed, event.body, sign, kind=kind, signed=signed_body)


@action("deliver_fuzzed")
async def _deliver_fuzzed(run: WireRun, args: Mapping[str, Any]) -> None:
    """Structure-aware bad input (:mod:`conformance.harnesses.fuzz_cases`): ``kind`` is
    ``headers`` (the grammar of every header the signature covers; ``cases`` more seeded random
    values), ``unsigned-id`` (the same for the headers it does not cover), ``wrong-length``,
    ``truncated`` (a prefix of the genuine signature), ``case-swapped`` (the genuine signature
    with its letters' case swapped),
    ``not-utf8``, ``not-json`` or ``not-ijson`` (bodies under the genuine signature, or
    correctly signed with ``signed=True``), ``odd-json`` (unsigned JSON of
    a shape or depth no event has), or ``repeated`` (each webhook
    header twice, the second value's id being event ``other``'s)."""
    event = run.event(args["event"])
    kind = str(args.get("kind", "headers"))
    other = str(args.get("other", f"{args['event']}-other"))
    signed = bool(args.get("signed", False))
    for case in _fuzz_cases(run, event, kind, int(args.get("cases", 0)), other, signed):
        run.sensitive.update(
            run.options.scheme.signatures_of(
                {k: v.decode("latin-1") for k, v in case.headers.items()}
            )
        )
        wire = (*run.options.request_headers.pairs, *case.wire())
        await run.send(args["label"], WireRequest(run.options.url, wire, case.body), event.event_id)


@action("deliver_each_secret")
async def _deliver_each_secret(run: WireRun, args: Mapping[str, Any]) -> None:
    """One event per secret the runner holds, each signed with that secret alone."""
    for index in range(len(run.options.scheme.secrets)):
        event = run.event(f"{args['event']}-{index}")
        request = run.signed(event, secret_index=index)
        await run.send(args["label"], request, event.event_id)


@action("wait")
async def _wait(run: WireRun, args: Mapping[str, Any]) -> None:
    """Let ``--patience`` pass in real time since the scenario's first copy (sent early, before
    the first scenario, the run's own time counts): a late duplicate must still be recognised."""
    first = min(run.first_sent.values(), default=time.perf_counter())
    remaining = run.options.patience - (time.perf_counter() - first)
    if remaining > 0:
        await asyncio.sleep(remaining)  # real time: what a dedupe record must outlast


@action("deliver_sized")
async def _deliver_sized(run: WireRun, args: Mapping[str, Any]) -> None:
    """A correctly signed body sized from the declared ``--max-body``: ``over`` (twice the
    limit, plus 1 KiB) or ``within`` (the limit less a margin of 1 KiB, or a quarter of a
    limit under 4 KiB, so that the JSON framing never tips it over)."""
    limit = run.options.max_body
    if limit is None:
        raise HarnessError("no body limit declared (--max-body)")
    event = run.event(args["event"])
    size = 2 * limit + 1024 if args["size"] == "over" else limit - min(1024, limit // 4)
    body = padded(event.body, size)
    await run.send(args["label"], run.signed(event, body=body), event.event_id)


@action("deliver_staggered")
async def _deliver_staggered(run: WireRun, args: Mapping[str, Any]) -> None:
    """The first copy, then copies staggered through its handling (after a few event-loop turns,
    then 1, 2, 4 … ms, until it answers), then one copy after it answered. A copy answered 2xx
    while the first was still in flight is matched by a probe reading taken at that moment."""
    event = run.event(args["event"])
    label = args["label"]
    first = asyncio.ensure_future(run.send(label, run.signed(event), event.event_id))
    copies: list[asyncio.Future[None]] = []
    delays = [0.0, 0.0, 0.0, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064]
    for delay in delays[: int(args.get("copies", len(delays)))]:
        for _ in range(3):
            await asyncio.sleep(0)  # let the first copy's handling move on
        if delay:
            await asyncio.wait({first}, timeout=delay)  # real time: stagger through it
        if first.done():
            break
        copies.append(asyncio.ensure_future(_copy_in_flight(run, event, label)))
    await first
    await asyncio.gather(*copies)
    await run.send(args.get("after", "after"), run.signed(event), event.event_id)


async def _copy_in_flight(run: WireRun, event: EventOnWire, label: str) -> None:
    exchange = await run.send(label, run.signed(event), event.event_id)
    if run.options.probe is None or exchange.status is None or exchange.status // 100 != 2:
        return
    snapshot = await run.read_probe(event.event_id)
    run.observations.setdefault(label, []).append((exchange, snapshot))


RETRY_BACKOFF_S = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
"""The waits between the copies of ``deliver_until_answered`` (the last one repeats)."""


@action("deliver_hang_up")
async def _deliver_hang_up(run: WireRun, args: Mapping[str, Any]) -> None:
    """A copy whose connection the runner closes the moment the whole request is sent, before
    any answer (:meth:`WireRun.send_and_hang_up`): the acknowledgement is lost."""
    event = run.event(args["event"])
    await run.send_and_hang_up(args["label"], run.signed(event), event.event_id)


@action("deliver_until_answered")
async def _deliver_until_answered(run: WireRun, args: Mapping[str, Any]) -> None:
    """Freshly signed copies, as a sender's retries, until one is answered other than "come
    back later" (:data:`~conformance.answers.RETRY_LATER`) or ``--timeout`` has passed since the
    first: waits of :data:`RETRY_BACKOFF_S` between them (shorter than a real sender's, so
    ``Retry-After`` is not waited out: a receiver answers a copy in flight the same however
    soon it comes)."""
    event = run.event(args["event"])
    deadline = time.perf_counter() + run.options.timeout
    for attempt in range(10_000):  # ends at the deadline; the bound only makes that plain
        exchange = await run.send(args["label"], run.signed(event), event.event_id)
        remaining = deadline - time.perf_counter()
        if exchange.status not in RETRY_LATER or remaining <= 0:
            return
        wait = RETRY_BACKOFF_S[min(attempt, len(RETRY_BACKOFF_S) - 1)]
        await asyncio.sleep(min(wait, remaining))  # real time: the first copy's work goes on


@action("deliver_many")
async def _deliver_many(run: WireRun, args: Mapping[str, Any]) -> None:
    count = int(args.get("count") or run.options.samples)
    for index in range(count):
        event = run.event(f"sample-{index}")
        await run.send(args["label"], run.signed(event), event.event_id)


@action("deliver_others")
async def _deliver_others(run: WireRun, args: Mapping[str, Any]) -> None:
    """``count`` other genuine events, each delivered once, ``--concurrency`` at a time: the
    ids a dedupe that remembers only recent ones (the last id, an LRU cache) fills up with."""
    count, width = int(args["count"]), run.options.concurrency
    events = [run.event(f"other-{index}") for index in range(count)]
    for start in range(0, count, width):
        await asyncio.gather(
            *(
                run.send(args["label"], run.signed(event), event.event_id)
                for event in events[start : start + width]
            )
        )


@action("deliver_concurrently")
async def _deliver_concurrently(run: WireRun, args: Mapping[str, Any]) -> None:
    event = run.event(args["event"])
    copies = int(args.get("copies") or run.options.concurrency)
    request = run.signed(event)  # identical copies: the same bytes and the same signature
    # Their bodies leave together once every copy's connection is open (no head start).
    gate = ArriveTogether(copies, bound_s=gate_bound(run.options.timeout))
    await asyncio.gather(
        *(
            run.send(args["label"], request, event.event_id, together=gate.copy())
            for _ in range(copies)
        )
    )


@action("script")
async def _script(run: WireRun, args: Mapping[str, Any]) -> None:
    """Scripts only the S harness's stand-in receiver; a real receiver answers for itself."""
