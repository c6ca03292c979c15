"""Benchmark: how far apart concurrent copies of one event reach a receiver, gated or not.

The runner sends ``idempotency.*`` copies concurrently. Sent with a plain ``gather``, the first
copy rides the client's idle keep-alive connection and is fully sent while the other copies are
still opening theirs; :class:`conformance.harnesses.together.ArriveTogether` holds every body
until each copy has written its headers. This bench serves a Starlette endpoint with uvicorn on
loopback that notes when each body has been read, sends groups of ``--copies`` copies (one idle
connection in the pool first, as in a run) both ways, interleaved, and prints the medians of the
gap between the first and the second body and of the spread of all of them.
Run: ``.venv/bin/python bench/bench_copies_together.py [--groups 20] [--copies 8]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, as is

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from conformance.deadline import request_within
from conformance.harnesses.together import ArriveTogether
from receiver.server import running_server

BODY = b'{"type":"hookproof.conformance.ping","data":{"reference":"evt_bench"}}'
_arrivals: list[float] = []


async def _endpoint(request: Request) -> Response:
    await request.body()
    _arrivals.append(time.perf_counter())
    await asyncio.sleep(0.002)  # a handler that takes a moment, as a real one does
    return JSONResponse({"ok": True})


async def _group(url: str, copies: int, gated: bool) -> tuple[float, float]:
    """(first-to-second gap, spread) of one group's body arrivals, in ms."""
    async with httpx.AsyncClient() as client:
        await client.post(url, content=BODY)  # one idle keep-alive connection, as in a run
        _arrivals.clear()
        gate = ArriveTogether(copies)
        length = [(b"content-length", str(len(BODY)).encode())]

        async def one() -> None:
            copy = gate.copy()
            try:
                if gated:
                    content = copy.body(BODY)
                    await request_within(
                        client, "POST", url, within_s=5, headers=length, content=content
                    )
                else:
                    await request_within(client, "POST", url, within_s=5, content=BODY)
            finally:
                copy.done()

        await asyncio.gather(*(one() for _ in range(copies)))
    times = sorted(_arrivals)
    return (times[1] - times[0]) * 1e3, (times[-1] - times[0]) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--groups", type=int, default=20, help="groups per way, interleaved")
    parser.add_argument("--copies", type=int, default=8, help="copies per group (at least 2)")
    args = parser.parse_args()
    copies = max(2, args.copies)
    app = Starlette(routes=[Route("/webhooks", _endpoint, methods=["POST"])])
    results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    with running_server(app) as base:
        for _ in range(max(1, args.groups)):
            for gated in (False, True):
                results[gated].append(asyncio.run(_group(f"{base}/webhooks", copies, gated)))
    print(f"{copies} copies per group, {args.groups} groups each way, interleaved")
    for gated, name in ((False, "plain gather"), (True, "ArriveTogether")):
        first = statistics.median(gap for gap, _ in results[gated])
        spread = statistics.median(spread for _, spread in results[gated])
        print(
            f"{name:15s} first-to-second body {first:6.2f} ms   all bodies within {spread:6.2f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
