"""Benchmark: group commit in the SQLite inbox against one fsync per operation, same run.

Every commit is durable (WAL, ``synchronous=FULL``) before its future resolves, in both
contenders (a transaction of claims only commits with ``synchronous=NORMAL``: the next commit's
fsync covers it); the only difference is how many jobs share one transaction (one fsync):

* group commit — ``SqliteInbox`` as shipped: the writer drains every pending job into one
  ``BEGIN IMMEDIATE … COMMIT``;
* one fsync per op — the same class with ``max_batch=1``: each job its own transaction (so one
  fsync per commit, none for a claim).

Two workloads, each on a fresh file in a temporary directory next to this script (so on the
disk the repository lives on, never tmpfs):

* burst — ``PAIRS`` concurrent claim+commit pairs, all started at once;
* closed loop — ``WORKERS`` concurrent workers doing claim+commit pairs back to back (how a
  server with ``WORKERS`` requests in flight drives it), ``PAIRS`` pairs in total.

Below them, the floor of the inbox's own SQL: the same claim and commit statements run by one
thread on a raw connection (no writer thread, no futures, no hand-over), in transactions of as
many pairs as group commit carried, each ending in an fsync. Its CPU per pair is what storing a
delivery costs before any of our code runs; the group-commit line's CPU over it is the price of
the writer thread and the event loop's side of the hand-over.

Run: ``.venv/bin/python bench/bench_inbox.py`` (about 30 s on two cores; most of it is the
one-fsync-per-op baseline).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from receiver.inbox import MemoryInbox, SqliteInbox
from receiver.inbox.contract import Inbox
from receiver.inbox.sqlite import _COMMIT, _INSERT_NEW  # the inbox's own statements
from receiver.inbox.sqlite_schema import MIGRATION_SET, MIGRATIONS
from receiver.sqlite_db import apply_migrations, connect, enable_wal

PAIRS = 2_000
WORKERS = 64
HERE = Path(__file__).resolve().parent


async def pair(inbox: Inbox, event_id: str) -> None:
    claim = await inbox.claim(event_id)
    assert await inbox.commit(event_id, claim.token, 200)


async def burst(inbox: Inbox, prefix: str) -> None:
    await asyncio.gather(*(pair(inbox, f"{prefix}-{n}") for n in range(PAIRS)))


async def closed_loop(inbox: Inbox, prefix: str) -> None:
    numbers = iter(range(PAIRS))

    async def worker() -> None:
        for n in numbers:
            await pair(inbox, f"{prefix}-{n}")

    await asyncio.gather(*(worker() for _ in range(WORKERS)))


async def measure(
    directory: str, workload: Callable[[Inbox, str], Awaitable[None]], max_batch: int | None
) -> tuple[float, str, float]:
    """Pairs per second, a note on batching and CPU cost (both threads) per pair, and the jobs
    per transaction (0 for the memory inbox)."""
    if max_batch is None:
        inbox: Inbox = MemoryInbox()
    else:
        path = os.path.join(directory, f"{workload.__name__}-{max_batch}.db")
        inbox = SqliteInbox(path, max_batch=max_batch)
    try:
        await pair(inbox, "warm-up")
        started, cpu_started = time.perf_counter(), time.process_time()
        await workload(inbox, "evt")
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
    finally:
        await inbox.close()
    note = f"CPU {cpu / PAIRS * 1e6:4.0f} µs/pair"
    jobs = 0.0
    if isinstance(inbox, SqliteInbox):
        stats = inbox.stats
        jobs = stats.jobs_per_batch
        note += f"; {stats.batches} transactions, {jobs:.1f} jobs each"
    return PAIRS / elapsed, note, jobs


def statements_alone(directory: str, pairs_per_transaction: int) -> str:
    """CPU per pair of the inbox's claim and commit statements run by this thread alone, in
    transactions of ``pairs_per_transaction`` pairs, each committed with an fsync."""
    conn = connect(os.path.join(directory, f"alone-{pairs_per_transaction}.db"))
    try:
        enable_wal(conn)
        apply_migrations(conn, MIGRATION_SET, MIGRATIONS)
        cpu_started = time.process_time()
        for start in range(0, PAIRS, pairs_per_transaction):
            ids = [f"evt-{n}" for n in range(start, min(start + pairs_per_transaction, PAIRS))]
            conn.execute("BEGIN IMMEDIATE")
            for event_id in ids:
                assert conn.execute(_INSERT_NEW, (event_id, 2, 1)).rowcount == 1
            for event_id in ids:
                assert conn.execute(_COMMIT, (200, 3, event_id, 1)).rowcount == 1
            conn.execute("COMMIT")
        cpu = time.process_time() - cpu_started
    finally:
        conn.close()
    return f"CPU {cpu / PAIRS * 1e6:4.0f} µs/pair; {pairs_per_transaction} pairs per transaction"


async def main() -> int:
    directory = tempfile.mkdtemp(prefix=".bench-inbox-", dir=HERE)
    try:
        print(f"python {sys.version.split()[0]}, {PAIRS} claim+commit pairs, "
              f"synchronous=FULL, files in {HERE}")  # fmt: skip
        print(f"{'workload':34} {'pairs/s':>9} {'× 1-fsync':>10}  cost and batching")
        ok = True
        for workload, label in ((burst, f"burst of {PAIRS}"), (closed_loop, f"{WORKERS} workers")):
            baseline, base_note, _ = await measure(directory, workload, 1)
            grouped, group_note, jobs = await measure(directory, workload, 1024)
            memory, memory_note, _ = await measure(directory, workload, None)
            print(f"{label + ', one fsync per op':34} {baseline:9.0f} {1.0:10.2f}  {base_note}")
            print(f"{label + ', group commit':34} {grouped:9.0f} {grouped / baseline:10.2f}"
                  f"  {group_note}")  # fmt: skip
            print(f"{label + ', memory (not durable)':34} {memory:9.0f} {memory / baseline:10.2f}"
                  f"  {memory_note}")  # fmt: skip
            pairs = max(1, round(jobs / 2))  # a claim and a commit per pair
            print(f"{label + ', the statements alone':34} {'':9} {'':10}"
                  f"  {statements_alone(directory, pairs)}")  # fmt: skip
            ok = ok and grouped > baseline
        print("PASS" if ok else "MISS")
        return 0 if ok else 1
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
