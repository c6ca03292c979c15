"""Benchmark: the conformance catalogue against its floor in CPU instructions, not seconds.

``bench_conformance.py`` times the catalogue against the bare request floor; on this project's
shared VMs a round's ratio swings from 1.3 to 2.5 with the neighbours' load. This bench counts
the user-space instructions both sides execute instead (valgrind's callgrind, which counts the
same total for the same work whatever else the machine does), so a change to the runner's or the
reference receiver's code shows up as a number that moves only with the code.

It runs, each under ``valgrind --tool=callgrind`` in a process of its own, the same in-process
set-up as ``bench_conformance.py`` (the reference receiver with its SQLite inbox, or a bare
Starlette endpoint, served by uvicorn from a thread; the catalogue with ``--patience 0`` through
one client built before it starts; the floor as that many sequential bare ``httpx`` POSTs), once
with one run and once with two: the difference is one run's instructions, with interpreter
start-up, imports and the warm-up left out. What instructions do not show is time spent outside
user space: the inbox's ``fdatasync`` per commit, socket system calls, threads waking each other.
The gap between this ratio and ``bench_conformance.py``'s is that part.

Needs valgrind (``apt-get install -y valgrind``); about four minutes on two cores. Run:
``.venv/bin/python bench/bench_conformance_instructions.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, as is

import bench_conformance as timed  # the same set-up, timed; this file's sibling
from starlette.applications import Starlette
from starlette.routing import Route

from receiver.app import ReceiverSettings, create_app
from receiver.server import running_server

TARGET = timed.TARGET
SECRET = "whsec_" + base64.b64encode(b"bench-conformance-instructions!!").decode()
BODY = b'{"type":"hookproof.conformance.ping","data":{"reference":"evt_bench"}}'
_COLLECTED = re.compile(r"Collected : (\d+)")


def _inner(side: str, runs: int, requests: int) -> int:
    """Run ``side`` ``runs`` times after one warm-up (this is what callgrind counts)."""
    if side == "catalogue":
        with tempfile.TemporaryDirectory(prefix="hookproof-bench-") as workdir:
            settings = ReceiverSettings(
                secrets=[SECRET], db=str(Path(workdir) / "inbox.sqlite"), probe_token=timed.TOKEN
            )
            with running_server(create_app(settings)) as base:
                for _ in range(runs + 1):
                    _, count, finished = asyncio.run(timed._catalogue(base, SECRET))
                    if not finished.summary.ok:
                        print(f"catalogue did not pass: {finished.summary}", file=sys.stderr)
                        return 1
        print(f"requests={count}")
        return 0
    bare = Starlette(routes=[Route("/webhooks", timed._bare, methods=["POST"])])
    with running_server(bare) as base:
        for _ in range(runs + 1):
            asyncio.run(timed._floor(base, requests, BODY))
    return 0


def _instructions(side: str, runs: int, requests: int) -> tuple[int, str]:
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--inner",
        side,
        "--runs",
        str(runs),
        "--requests",
        str(requests),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{side} under valgrind failed:\n{done.stdout}\n{done.stderr[-2000:]}")
    return int(found.group(1)), done.stdout


def _one_run(side: str, requests: int = 0) -> tuple[int, str]:
    """Instructions of one run of ``side`` (two runs minus one), and the two-run output."""
    one, _ = _instructions(side, 1, requests)
    two, output = _instructions(side, 2, requests)
    return two - one, output


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--inner", choices=("catalogue", "floor"), help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        return _inner(args.inner, args.runs, args.requests)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install -y valgrind)", file=sys.stderr)
        return 2
    catalogue, output = _one_run("catalogue")
    requests = int(re.findall(r"requests=(\d+)", output)[-1])
    floor, _ = _one_run("floor", requests)
    print(f"HTTP requests per run: {requests} (the catalogue's, sent again by the floor)")
    print(f"catalogue against the reference receiver: {catalogue / 1e6:8.1f} M instructions")
    print(f"floor, bare httpx -> bare Starlette:      {floor / 1e6:8.1f} M instructions")
    print(f"  per request: catalogue {catalogue / requests / 1e3:.0f} k, floor "
          f"{floor / requests / 1e3:.0f} k")  # fmt: skip
    print(f"ratio: {catalogue / floor:.2f}x in user-space instructions "
          f"(the timed bench's target: <= {TARGET:g}x in seconds)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
