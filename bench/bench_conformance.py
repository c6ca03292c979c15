"""Benchmark: the whole C catalogue against the reference receiver over loopback, versus the floor.

The floor is the same number of HTTP requests (webhooks and probe reads alike, counted by an httpx
event hook during the catalogue run) sent one after another by a bare ``httpx.AsyncClient`` to a
bare Starlette endpoint that answers 200, both served by uvicorn on loopback in this same run.
The catalogue's client is the runner's own kind (``sender_client``: no cookie jar, the quick
idle-connection check and linear pool bookkeeping of ``sender_sim.connection_pool``), the
floor's a bare one (it keeps one connection, so neither would change its figure); each side's
client is built before its clock starts (TLS context set-up is neither side's work), and the
catalogue runs with ``--patience 0`` (real-time patience is the user's choice,
excluded from the figure). The ratio says what the runner costs on top of HTTP itself: signing,
scenario bookkeeping, the sender simulator's virtual-time scheduling and the reference receiver's
durable SQLite commits (``synchronous=FULL``). Target: ≤ 1.5× (issues 9 and 14).

Each round runs the catalogue and then the floor, back to back, and the figure is the median of
the rounds' own ratios: on a shared machine whose speed drifts from one second to the next (steal
time on a VM), a ratio of two runs made seconds apart is steadier than a ratio of two medians.

``--own-clients`` runs the catalogue the way ``hookproof check`` does instead: with the runner's
own clients (one for the webhooks, one that sends each copy of an acknowledged event on a
connection of its own, one for the probe), the reachability check and the probe's preflight,
all inside the clock; the requests are then counted where the reference receiver receives them.
Run: ``.venv/bin/python bench/bench_conformance.py [--rounds 7] [--own-clients]``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, as is

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from conformance.config import CheckSettings
from conformance.events import Event, RunFinished
from conformance.session import run_check
from receiver.app import ReceiverSettings, create_app
from receiver.server import running_server
from sender_sim.connection_pool import install
from sender_sim.sender_client import sender_client

ROUNDS = 7
TARGET = 1.5
TOKEN = "bench-probe-token"


class _Last:
    def __init__(self) -> None:
        self.finished: RunFinished | None = None

    def handle(self, event: Event) -> None:
        if isinstance(event, RunFinished):
            self.finished = event


class _Counted:
    """An ASGI app that counts the HTTP requests reaching ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.requests = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.requests += 1
        await self.app(scope, receive, send)


def _settings(base: str, secret: str) -> CheckSettings:
    return CheckSettings(
        url=f"{base}/webhooks",
        secrets=(secret,),
        probe=f"{base}/_hookproof/events",
        probe_token=TOKEN,
        seed=1,
        patience=0,  # real-time patience is the user's choice, excluded from the figure
    )


class _UnderWay(httpx.AsyncBaseTransport):
    """A transport that measures the seconds during which at least one request was under way
    (from its sending to its answer's head, or to its end when the runner hung up on it)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.outstanding = 0
        self.since = 0.0
        self.busy = 0.0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.outstanding == 0:
            self.since = time.perf_counter()
        self.outstanding += 1
        try:
            return await self.inner.handle_async_request(request)
        finally:
            self.outstanding -= 1
            if self.outstanding == 0:
                self.busy += time.perf_counter() - self.since

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _catalogue(
    base: str, secret: str, *, in_flight: list[float] | None = None
) -> tuple[float, int, RunFinished]:
    """One catalogue run: its seconds, its HTTP requests and its result. ``in_flight``, when
    given, receives the seconds during which at least one request was under way (from its
    sending to its answer's head), for ``profile_conformance.py``."""
    settings = _settings(base, secret)
    count = 0

    async def counted(request: httpx.Request) -> None:
        nonlocal count
        count += 1

    limits = httpx.Limits(max_connections=32)
    options: dict[str, object] = {"event_hooks": {"request": [counted]}, "limits": limits}
    under_way = None
    if in_flight is not None:  # the runner's kind of transport, measured
        inner = httpx.AsyncHTTPTransport(limits=limits)
        install(inner)
        under_way = options["transport"] = _UnderWay(inner)
    last = _Last()
    async with sender_client(**options) as client:
        started = time.perf_counter()
        await run_check(settings, [last], client=client)
        elapsed = time.perf_counter() - started
    assert last.finished is not None
    if in_flight is not None and under_way is not None:
        in_flight.append(under_way.busy)
    return elapsed, count, last.finished


async def _catalogue_own_clients(
    base: str, secret: str, counted: _Counted
) -> tuple[float, int, RunFinished]:
    last = _Last()
    before = counted.requests
    started = time.perf_counter()
    await run_check(_settings(base, secret), [last])
    elapsed = time.perf_counter() - started
    assert last.finished is not None
    return elapsed, counted.requests - before, last.finished


async def _floor(base: str, requests: int, body: bytes) -> float:
    async with httpx.AsyncClient() as client:
        started = time.perf_counter()
        for _ in range(requests):
            response = await client.post(f"{base}/webhooks", content=body)
            response.raise_for_status()
        return time.perf_counter() - started


async def _bare(request: Request) -> Response:
    await request.body()
    return JSONResponse({"ok": True})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="catalogue + floor pairs")
    parser.add_argument(
        "--own-clients", action="store_true", help="the runner's own clients, as the CLI runs"
    )
    args = parser.parse_args()
    rounds = max(1, args.rounds)
    secret = "whsec_" + base64.b64encode(os.urandom(24)).decode()
    bare = Starlette(routes=[Route("/webhooks", _bare, methods=["POST"])])
    body = b'{"type":"hookproof.conformance.ping","data":{"reference":"evt_bench"}}'
    runs: list[float] = []
    floors: list[float] = []
    requests = 0
    with tempfile.TemporaryDirectory(prefix="hookproof-bench-") as workdir:
        settings = ReceiverSettings(
            secrets=[secret], db=str(Path(workdir) / "inbox.sqlite"), probe_token=TOKEN
        )
        app = create_app(settings)
        counted = _Counted(app)  # served only with --own-clients: no work added otherwise

        def catalogue(base: str) -> tuple[float, int, RunFinished]:
            if args.own_clients:
                return asyncio.run(_catalogue_own_clients(base, secret, counted))
            return asyncio.run(_catalogue(base, secret))

        served = counted if args.own_clients else app
        with running_server(served) as reference, running_server(bare) as floor:
            catalogue(reference)  # warm-up: imports, connections, SQLite
            for _ in range(rounds):
                elapsed, requests, finished = catalogue(reference)
                if not finished.summary.ok:
                    print(f"catalogue did not pass: {finished.summary}", file=sys.stderr)
                    print({r.scenario.id: r.message for r in finished.results}, file=sys.stderr)
                    return 1
                runs.append(elapsed)
                floors.append(asyncio.run(_floor(floor, requests, body)))
    scenarios = len(finished.results)
    catalogue_s, floor_s = statistics.median(runs), statistics.median(floors)
    ratios = [run / floor for run, floor in zip(runs, floors, strict=True)]
    clients = "the runner's own clients" if args.own_clients else "one client, built before"
    print(f"scenarios: {scenarios} (all passed), HTTP requests per run: {requests} ({clients})")
    print(f"catalogue against the reference receiver: {catalogue_s:.3f} s (median of {rounds})")
    print(f"floor, bare httpx -> bare Starlette:      {floor_s:.3f} s (median of {rounds})")
    print(f"ratio per round: {', '.join(f'{ratio:.2f}' for ratio in ratios)}")
    print(f"ratio: {statistics.median(ratios):.2f}x, median of the rounds (target <= {TARGET:g}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
