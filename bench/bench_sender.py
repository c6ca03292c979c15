"""Benchmark: state transitions per second through the full sender machine, beside the raw
SQLite floor measured in the same run.

* floor — the minimal durable transition, measured in the same run on a fresh file with the
  production pragmas (WAL, ``synchronous=FULL``): one state update (guarded by its token) and one
  ledger row per transition, ``--batch`` transitions per ``BEGIN IMMEDIATE … COMMIT`` (one fsync
  per batch, as the store batches a worker pass), both statements through ``executemany``. So
  the ratio measures the machine's own code, not the disk: a floor of single-row commits (one
  fsync each, the earlier definition) tracked the disk's fsync latency instead;
* machine — ``--deliveries`` deliveries (default 100,000) published in batches, then run to
  completion on the virtual clock with the SQLite store on a file (same pragmas): each worker
  pass leases up to ``--batch`` due deliveries in one transaction, signs and sends each through
  ``httpx.MockTransport`` to a scripted receiver that fails 30% of the time (15% 503, 5% 429 with
  ``Retry-After: 1``, 5% read timeout, 5% connection refused), then persists every outcome's
  transition with its ledger row and attempt in one transaction (each state change guarded by its
  fencing token; the acks are those guarded commits, after persist). Retries wait for their
  jittered due time; the simulated worker polls once per virtual second (it wakes on the
  first whole second at or after the next due time and claims everything due), and the virtual
  clock jumps there: hours of backoff take no wall time.

``--fan-out N`` (N > 1) is the platform variant: N endpoints subscribed to the event type, and
``--deliveries / N`` events published with ``Simulator.publish_events`` (fan-out, one
transaction per batch), so every event materialises N deliveries; the same target applies.

"Transitions" are the ledger's state-change rows (publish, lease, delivered / retry / dead
letter), counted from the file at the end. The ratio is the machine's transitions/s over the
floor's transitions/s (report only: the floor does none of the signing, sending, scheduling or
bookkeeping a real transition needs).

Files go to a temporary directory next to this script (the repository's disk, never tmpfs).
Run: ``.venv/bin/python bench/bench_sender.py [--deliveries N] [--batch N] [--fan-out 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout without reinstalling

from sender_sim import (  # noqa: E402
    EventPublication,
    FullJitter,
    Policy,
    Publication,
    Simulator,
    SQLiteStore,
    VirtualClock,
)

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
T0 = datetime(2026, 8, 13, 9, 0, tzinfo=UTC)


def floor(directory: Path, transitions: int, batch: int) -> float:
    """Minimal durable transitions per second: per transition one token-guarded state update and
    one ledger row, ``batch`` of them per transaction (WAL, synchronous=FULL)."""
    conn = sqlite3.connect(directory / "floor.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(
        "CREATE TABLE deliveries (id INTEGER PRIMARY KEY, state TEXT NOT NULL, "
        "token INTEGER NOT NULL)"
    )
    conn.execute(
        "CREATE TABLE ledger (id INTEGER PRIMARY KEY, delivery_id INTEGER NOT NULL, "
        "from_state TEXT, to_state TEXT NOT NULL, at_us INTEGER NOT NULL)"
    )
    conn.executemany(
        "INSERT INTO deliveries (id, state, token) VALUES (?, 'scheduled', 1)",
        ((n,) for n in range(batch)),
    )
    started = time.perf_counter()
    for first in range(0, transitions, batch):
        token = 1 + first // batch
        ids = range(min(batch, transitions - first))
        at_us = time.time_ns() // 1000
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "UPDATE deliveries SET state = ?, token = token + 1 WHERE id = ? AND token = ?",
            (("leased", n, token) for n in ids),
        )
        conn.executemany(
            "INSERT INTO ledger (delivery_id, from_state, to_state, at_us) VALUES (?, ?, ?, ?)",
            ((n, "scheduled", "leased", at_us) for n in ids),
        )
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return transitions / elapsed


def receiver(seed: int) -> httpx.MockTransport:
    rng = random.Random(seed)

    def answer(request: httpx.Request) -> httpx.Response:
        roll = rng.random()
        if roll < 0.70:
            return httpx.Response(200, text="ok")
        if roll < 0.85:
            return httpx.Response(503, text="busy")
        if roll < 0.90:
            return httpx.Response(429, headers={"retry-after": "1"})
        if roll < 0.95:
            raise httpx.ReadTimeout("timed out", request=request)
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    return httpx.MockTransport(answer)


def publish(sim: Simulator, deliveries: int, batch: int, fan_out: int) -> None:
    """Publish ``deliveries`` deliveries in batches: one endpoint and one event each, or
    ``fan_out`` endpoints and one event per ``fan_out`` deliveries."""
    deadline = T0 + timedelta(days=1)
    if fan_out <= 1:
        sim.add_endpoint("bench", "http://127.0.0.1:9/webhooks", [SECRET])
        for first in range(0, deliveries, batch):
            count = min(batch, deliveries - first)
            sim.publish_many(
                [
                    Publication(
                        endpoint_id="bench",
                        deadline_at=deadline,
                        event_type="renewal.reminder",
                        data={"renewal_id": f"ren_{first + n}"},
                        business_key=f"ren_{first + n}",
                    )
                    for n in range(count)
                ]
            )
        return
    for n in range(fan_out):
        sim.add_endpoint(
            f"bench-{n}",
            f"http://127.0.0.1:9/webhooks/{n}",
            [SECRET],
            event_types=["renewal.reminder"],
        )
    events = deliveries // fan_out
    per_batch = max(1, batch // fan_out)
    for first in range(0, events, per_batch):
        count = min(per_batch, events - first)
        sim.publish_events(
            [
                EventPublication(
                    event_type="renewal.reminder",
                    deadline_at=deadline,
                    data={"renewal_id": f"ren_{first + n}"},
                    business_key=f"ren_{first + n}",
                )
                for n in range(count)
            ]
        )


async def machine(
    directory: Path, deliveries: int, batch: int, fan_out: int = 1
) -> dict[str, float]:
    store = SQLiteStore(directory / "sender.db", synchronous=os.environ.get("BENCH_SYNC", "FULL"))
    clock = VirtualClock(T0)
    policy = Policy(
        backoff=FullJitter(base=timedelta(seconds=5), cap=timedelta(minutes=5)),
        max_attempts=8,
        expected_attempt_time=timedelta(seconds=30),
        lease_duration=timedelta(minutes=2),
    )
    async with httpx.AsyncClient(transport=receiver(7)) as client:
        sim = Simulator(store, clock=clock, policy=policy, client=client, seed=7)
        started = time.perf_counter()
        publish(sim, deliveries, batch, fan_out)
        published = time.perf_counter() - started
        report = await sim.run_until_settled(limit=batch, poll_interval=timedelta(seconds=1))
        elapsed = time.perf_counter() - started
    metrics = sim.metrics()
    (transitions,) = store._read("SELECT count(*) FROM ledger WHERE to_state IS NOT NULL")[0]
    (attempts,) = store._read("SELECT count(*) FROM attempts")[0]
    store.close()
    return {
        "elapsed": elapsed,
        "publish_s": published,
        "transitions": transitions,
        "attempts": attempts,
        "passes": report.passes,
        "delivered": metrics.states.get("delivered", 0),
        "dead": metrics.states.get("dead_letter", 0),
        "live": metrics.states.get("scheduled", 0) + metrics.states.get("leased", 0),
        "virtual_h": (clock.now() - T0) / timedelta(hours=1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--deliveries", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000, help="deliveries per worker pass")
    parser.add_argument("--floor-transitions", type=int, default=200_000)
    parser.add_argument(
        "--fan-out", type=int, default=1, help="endpoints each event fans out to (1: no fan-out)"
    )
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="bench-sender-", dir=HERE))
    try:
        floor_rate = floor(directory, args.floor_transitions, args.batch)
        print(
            f"floor: {floor_rate:,.0f} minimal transitions/s (state update + ledger row, "
            f"{args.batch} per transaction; WAL, synchronous=FULL; "
            f"{args.floor_transitions:,} transitions)"
        )
        result = asyncio.run(machine(directory, args.deliveries, args.batch, args.fan_out))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    rate = result["transitions"] / result["elapsed"]
    shape = f" (fan-out to {args.fan_out} endpoints per event)" if args.fan_out > 1 else ""
    print(
        f"machine{shape}: {args.deliveries:,} deliveries, {result['attempts']:,.0f} attempts, "
        f"{result['transitions']:,.0f} transitions in {result['elapsed']:.1f} s "
        f"(publishing {result['publish_s']:.1f} s; {result['passes']:.0f} worker passes; "
        f"{result['virtual_h']:.2f} h of virtual time)"
    )
    print(
        f"         delivered {result['delivered']:,.0f}, dead letters {result['dead']:,.0f}, "
        f"still live {result['live']:,.0f}"
    )
    print(f"machine: {rate:,.0f} transitions/s")
    print(
        f"ratio:   {rate / floor_rate:.3f}x the minimal-transition floor "
        f"({1e6 / rate:.1f} us per transition vs the floor's {1e6 / floor_rate:.1f} us; "
        "report only: what the machine's own code costs per transition)"
    )
    print(f"cores:   {os.cpu_count()}")


if __name__ == "__main__":
    main()
