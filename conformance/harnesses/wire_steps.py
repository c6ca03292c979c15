"""The HTTP harness's wire-level steps: ``deliver`` and its mutations, fuzzed headers, identical
concurrent copies and latency samples, each turned into the signed requests a receiver sees.

Each step interpreter is registered in :data:`ACTIONS` by action name; sender-level steps are in
:data:`conformance.harnesses.sender_steps.SENDER_ACTIONS` instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from conformance.harnesses.signed_requests import WireRequest
from conformance.harnesses.state import WireRun

__all__ = ["ACTIONS", "action"]

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
