"""Benchmark: what one request of each kind the catalogue sends costs, against the bare floor.

The conformance catalogue's ratio (``bench_conformance.py``) is set by the kinds of requests it
sends. This bench serves the reference receiver (SQLite inbox, ``synchronous=FULL``, probe on)
and a bare Starlette endpoint with uvicorn on loopback, in this process as the catalogue bench
does, and sends ``--requests`` sequential requests of each kind per round, interleaved over
``--rounds`` rounds: ``floor`` (a POST to the bare endpoint), ``accepted`` (a new, correctly
signed event: verified, claimed, handled, committed with an fsync), ``refused`` (a wrong
signature: 401 before any claim) and ``probe`` (a probe read of an unknown event). Signing is
done before the clock starts. It prints each kind's median ms per request and its ratio to the
floor's. Run: ``.venv/bin/python bench/bench_request_kinds.py [--rounds 5] [--requests 100]``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
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

from receiver.app import ReceiverSettings, create_app
from receiver.server import running_server
from receiver.signing import Secret, Verifier

KINDS = ("floor", "accepted", "refused", "probe")
TOKEN = "bench-probe-token"


async def _bare(request: Request) -> Response:
    await request.body()
    return JSONResponse({"ok": True})


def _requests(
    signer: Verifier, kind: str, count: int, tag: str
) -> list[tuple[bytes, dict[str, str]]]:
    now = int(time.time())
    out = []
    for n in range(count):
        event_id = f"evt_bench_{tag}_{n}"
        body = json.dumps({"type": "hookproof.conformance.ping", "data": {"reference": event_id}})
        headers = signer.sign(body.encode(), event_id=event_id, timestamp=now)
        if kind == "refused":
            headers["webhook-signature"] = "v1," + base64.b64encode(bytes(32)).decode()
        out.append((body.encode(), headers))
    return out


async def _round(
    reference: str, floor: str, signer: Verifier, count: int, tag: str
) -> dict[str, float]:
    """ms per request of each kind, in one round."""
    timings: dict[str, float] = {}
    async with httpx.AsyncClient() as client:
        for kind in KINDS:
            prepared = _requests(signer, kind, count, f"{tag}_{kind}")
            started = time.perf_counter()
            for body, headers in prepared:
                if kind == "probe":
                    url = f"{reference}/_hookproof/events/evt_unknown"
                    auth = {"authorization": f"Bearer {TOKEN}"}
                    response = await client.get(url, headers=auth)
                    expected = 404
                else:
                    base = floor if kind == "floor" else reference
                    response = await client.post(f"{base}/webhooks", content=body, headers=headers)
                    expected = 401 if kind == "refused" else 200
                if response.status_code != expected:
                    raise SystemExit(f"{kind}: answered {response.status_code}, not {expected}")
            timings[kind] = (time.perf_counter() - started) / count * 1e3
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--requests", type=int, default=100, help="requests per kind per round")
    args = parser.parse_args()
    secret = "whsec_" + base64.b64encode(os.urandom(24)).decode()
    signer = Verifier([Secret(secret)])
    bare = Starlette(routes=[Route("/webhooks", _bare, methods=["POST"])])
    rounds: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="hookproof-bench-") as workdir:
        settings = ReceiverSettings(
            secrets=[secret], db=str(Path(workdir) / "inbox.sqlite"), probe_token=TOKEN
        )
        with running_server(create_app(settings)) as reference, running_server(bare) as floor:
            asyncio.run(_round(reference, floor, signer, 20, "warm"))
            for index in range(max(1, args.rounds)):
                rounds.append(
                    asyncio.run(_round(reference, floor, signer, args.requests, str(index)))
                )
    print(f"{args.requests} sequential requests per kind, {len(rounds)} interleaved rounds")
    floor_ms = statistics.median(r["floor"] for r in rounds)
    for kind in KINDS:
        ms = statistics.median(r[kind] for r in rounds)
        per_round = ", ".join(f"{r[kind] / r['floor']:.2f}" for r in rounds)
        print(
            f"{kind:9s} {ms:6.3f} ms/request  {ms / floor_ms:5.2f}x the floor"
            f"  (rounds: {per_round})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
