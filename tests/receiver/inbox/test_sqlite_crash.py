"""A process killed with SIGKILL mid-stream loses no commit it had already returned.

The child commits events as fast as it can (64 at a time, so batches are shared) and prints each
event id only after ``commit`` returned — what the middleware does before its 2xx. The parent kills
it while commits are still in flight, reopens the file, and finds every printed id committed.

SIGKILL leaves the operating system's page cache intact, so this proves "committed before it was
answered" (it fails, for instance, if transactions were held open across batches), not the fsync:
that ``synchronous=FULL`` is in force is asserted in ``test_sqlite.py``.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from receiver.inbox import RecordState, SqliteInbox

pytestmark = pytest.mark.subprocess

CHILD = """
import asyncio, sys
from receiver.inbox import SqliteInbox

async def main(path):
    inbox = SqliteInbox(path)
    numbers = iter(range(10**9))

    async def worker():
        for n in numbers:
            claim = await inbox.claim(f"evt_{n}")
            if await inbox.commit(claim.event_id, claim.token, 202):
                sys.stdout.write(claim.event_id + "\\n")
                sys.stdout.flush()

    await asyncio.gather(*(worker() for _ in range(64)))

asyncio.run(main(sys.argv[1]))
"""

ACKNOWLEDGED_BEFORE_KILL = 300


def test_every_returned_commit_survives_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "inbox.db"
    acknowledged: list[str] = []
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[3],
    ) as child:
        assert child.stdout is not None
        assert child.stderr is not None
        try:
            while len(acknowledged) < ACKNOWLEDGED_BEFORE_KILL:
                line = child.stdout.readline()  # blocks until the child acknowledges one more
                if not line:
                    pytest.fail(f"the child stopped early: {child.stderr.read().decode()}")
                acknowledged.append(line.decode().strip())
            child.send_signal(signal.SIGKILL)
        finally:
            if child.poll() is None:
                child.kill()
            child.wait()
        acknowledged += [line.decode().strip() for line in child.stdout.readlines()]
    assert child.returncode == -signal.SIGKILL
    asyncio.run(_all_committed(path, acknowledged))


async def _all_committed(path: Path, acknowledged: list[str]) -> None:
    inbox = SqliteInbox(path)
    try:
        for event_id in acknowledged:
            record = await inbox.lookup(event_id)
            assert record is not None, f"{event_id} was acknowledged but is gone"
            assert (record.state, record.status, record.effects) == (
                RecordState.COMMITTED,
                202,
                1,
            )
    finally:
        await inbox.close()
