"""Where the conformance catalogue's time goes: CPU per thread, the inbox's commits, the profile.

A diagnostic beside ``bench_conformance.py`` (same receiver, same catalogue, same floor): for
``--runs`` catalogue runs and as many floor runs it prints each thread's CPU per run (read from
``/proc/self/task``, so Linux only: the runner's thread, the receiver's server thread, the inbox's
writer), how much of a run's time a request was under way and how much the runner spent alone
between requests, the inbox's durable batches per run and the median wait of a commit, and a
cProfile of the runner's thread summed by package (hookproof's own code against httpx, httpcore,
anyio and h11). Run: ``.venv/bin/python bench/profile_conformance.py [--runs 20]``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, as is
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_conformance import TOKEN, _bare, _catalogue, _floor
from starlette.applications import Starlette
from starlette.routing import Route

from receiver.app import ReceiverSettings, create_app
from receiver.inbox.sqlite import SqliteInbox
from receiver.server import running_server

BODY = b'{"type":"hookproof.conformance.ping","data":{"reference":"evt_bench"}}'
PACKAGES = ("conformance", "sender_sim", "receiver", "httpx", "httpcore", "anyio", "h11")


def _cpu_by_thread() -> dict[str, float]:
    """CPU seconds so far of each live thread of this process, by thread name."""
    names = {str(t.native_id): t.name.split(":")[0] for t in threading.enumerate()}
    ticks = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = collections.defaultdict(float)
    for tid in os.listdir("/proc/self/task"):
        try:
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        out[names.get(tid, "other")] += (int(fields[11]) + int(fields[12])) / ticks
    return out


def _per_run(before: dict[str, float], after: dict[str, float], runs: int) -> str:
    spent = {name: (after[name] - before.get(name, 0.0)) / runs for name in after}
    shown = sorted(((s, n) for n, s in spent.items() if s >= 0.0005), reverse=True)
    return ", ".join(f"{name} {seconds * 1000:.0f} ms" for seconds, name in shown)


def _package(filename: str) -> str:
    for package in PACKAGES:
        if f"/{package}/" in filename:
            return package
    return "other"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=20, help="catalogue runs (and floor runs)")
    runs = max(1, parser.parse_args().runs)
    secret = "whsec_" + base64.b64encode(os.urandom(24)).decode()
    inboxes: list[SqliteInbox] = []
    waits: list[float] = []
    opened, commit = SqliteInbox.__init__, SqliteInbox.commit

    def tracked_init(self: SqliteInbox, *args: Any, **kwargs: Any) -> None:
        opened(self, *args, **kwargs)
        inboxes.append(self)

    async def timed_commit(self: SqliteInbox, *args: Any, **kwargs: Any) -> bool:
        started = time.perf_counter()
        try:
            return await commit(self, *args, **kwargs)
        finally:
            waits.append(time.perf_counter() - started)

    SqliteInbox.__init__ = tracked_init  # type: ignore[method-assign]
    SqliteInbox.commit = timed_commit  # type: ignore[method-assign]
    bare = Starlette(routes=[Route("/webhooks", _bare, methods=["POST"])])
    with tempfile.TemporaryDirectory(prefix="hookproof-profile-") as workdir:
        settings = ReceiverSettings(
            secrets=[secret], db=str(Path(workdir) / "inbox.sqlite"), probe_token=TOKEN
        )
        with running_server(create_app(settings)) as reference, running_server(bare) as floor:
            _, requests, _ = asyncio.run(_catalogue(reference, secret))  # warm-up
            inbox = inboxes[-1]
            batches, waits[:] = inbox.stats.batches, []
            before = _cpu_by_thread()
            walls, in_flight = [], list[float]()
            for _ in range(runs):
                walls.append(asyncio.run(_catalogue(reference, secret, in_flight=in_flight))[0])
            catalogue_cpu = _per_run(before, _cpu_by_thread(), runs)
            batches = (inbox.stats.batches - batches) / runs
            before = _cpu_by_thread()
            floors = [asyncio.run(_floor(floor, requests, BODY)) for _ in range(runs)]
            floor_cpu = _per_run(before, _cpu_by_thread(), runs)
            median_wait = statistics.median(waits) * 1000 if waits else 0.0  # unprofiled runs
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(runs):
                asyncio.run(_catalogue(reference, secret))
            profile.disable()
    by_package: dict[str, float] = collections.defaultdict(float)
    stats: Any = getattr(pstats.Stats(profile), "stats")  # noqa: B009 (untyped in typeshed)
    for (filename, _, _), (_, _, own, _, _) in stats.items():
        by_package[_package(filename)] += own
    total = sum(by_package.values())
    print(f"{runs} runs of the catalogue ({requests} requests) and of the floor")
    wall, busy = statistics.median(walls) * 1000, statistics.median(in_flight) * 1000
    print(
        f"time per catalogue run: {wall:.0f} ms, a request under way {busy:.0f} ms of it, "
        f"the runner alone between requests {wall - busy:.0f} ms; per floor run: "
        f"{statistics.median(floors) * 1000:.0f} ms (medians)"
    )
    print(f"CPU per catalogue run: {catalogue_cpu}")
    print(f"CPU per floor run:     {floor_cpu}")
    print(f"inbox: {batches:.0f} batches per run, a commit waits {median_wait:.2f} ms (median)")
    print("runner thread's profile, own time by package:")
    for package, seconds in sorted(by_package.items(), key=lambda item: -item[1]):
        print(f"  {package:12} {100 * seconds / total:5.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
