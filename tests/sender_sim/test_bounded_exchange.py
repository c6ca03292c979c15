"""Every exchange of a sender is bounded in time and in what it reads: an endpoint that drips its
answer is cut at the deadline, one that streams an endless body is read no further than the cap,
and the simulator's attempts against either end as the timeout or the answer they are."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from sender_sim import OutcomeKind, Simulator, SQLiteStore, VirtualClock, policy_named
from sender_sim.bounded_exchange import AnswerLate, send_within
from sender_sim.wire import SAMPLE_LIMIT
from tests.sender_sim.conftest import SECRET, T0
from tests.support.raw_server import raw_server

Answering = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _answering(body: Callable[[asyncio.StreamWriter], Awaitable[None]]) -> Answering:
    """A server that reads one request head (and its body), then lets ``body`` answer."""

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            await reader.readexactly(length)
            await body(writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    return connection


async def _endless(writer: asyncio.StreamWriter) -> None:
    """200, then a chunked body that never ends, as fast as the client reads it."""
    writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    chunk = b"x" * 65536
    frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    for _ in range(1_000_000):  # ~64 GB: far more than any run reads
        writer.write(frame)
        await writer.drain()


async def _dripping(writer: asyncio.StreamWriter) -> None:
    """200 with a 1000-byte body, one byte every 0.05 s (50 s in all)."""
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n")
    for _ in range(1000):
        await writer.drain()
        writer.write(b" ")
        await asyncio.sleep(0.05)  # real-time: the endpoint under test drips its answer


async def _silent(writer: asyncio.StreamWriter) -> None:
    await asyncio.sleep(60)  # real-time: the endpoint reads the request and never answers


def _exchange(server: Answering, within_s: float, max_bytes: int) -> object:
    with raw_server(server) as base:

        async def run() -> object:
            async with httpx.AsyncClient() as client:
                request = client.build_request("POST", f"{base}/webhooks", content=b"{}")
                try:
                    return await send_within(
                        client,
                        request,
                        within_s=within_s,
                        max_bytes=max_bytes,
                        follow_progress=True,
                    )
                except AnswerLate as late:
                    return late

        return asyncio.run(run())


def test_an_endless_body_is_read_no_further_than_the_cap() -> None:
    started = time.monotonic()
    answer = _exchange(_answering(_endless), within_s=5.0, max_bytes=100_000)
    assert time.monotonic() - started < 5.0  # it did not read on until the deadline
    assert not isinstance(answer, AnswerLate)
    assert answer.status_code == 200  # type: ignore[attr-defined]
    assert len(answer.content) == 100_000  # type: ignore[attr-defined]
    assert answer.complete is False  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("server", "status", "said"),
    [
        (_dripping, 200, "answered 200 but the body did not finish within 0.5 s"),
        (_silent, None, "no answer within 0.5 s"),
    ],
)
def test_an_answer_late_in_all_is_cut_at_the_deadline_saying_how_far_it_got(
    server: Callable[[asyncio.StreamWriter], Awaitable[None]], status: int | None, said: str
) -> None:
    started = time.monotonic()
    late = _exchange(_answering(server), within_s=0.5, max_bytes=100_000)
    assert time.monotonic() - started < 3.0  # each byte came within httpx's read timeout
    assert isinstance(late, AnswerLate)
    assert late.status == status
    assert late.sent is True  # the request had left: the endpoint may have it
    assert said in late.describe()


@pytest.mark.parametrize(
    ("server", "kind", "status"),
    [(_dripping, OutcomeKind.TIMEOUT, None), (_endless, OutcomeKind.RESPONSE, 200)],
)
def test_an_attempt_ends_at_the_timeout_or_with_a_bounded_sample(
    tmp_path: Path,
    server: Callable[[asyncio.StreamWriter], Awaitable[None]],
    kind: OutcomeKind,
    status: int | None,
) -> None:
    """The simulator against a dripping endpoint records a timeout after the endpoint's timeout,
    not after the 50 s drip; against an endless body, the 200 with a sample of at most 500
    characters."""
    with raw_server(_answering(server)) as base:

        async def run() -> Simulator:
            async with httpx.AsyncClient() as client:
                sim = Simulator(
                    SQLiteStore(tmp_path / "sender.db"),
                    clock=VirtualClock(T0),
                    policy=policy_named("schedule"),
                    client=client,
                )
                sim.add_endpoint("slow", f"{base}/webhooks", [SECRET], timeout=0.5)
                sim.publish(endpoint_id="slow", deadline_at=T0 + timedelta(hours=1))
                await sim.run_due()
                return sim

        started = time.monotonic()
        sim = asyncio.run(run())
        assert time.monotonic() - started < 5.0
    (delivery,) = sim.deliveries()
    first = sim.attempts(delivery.delivery_id)[0]
    assert first.kind is kind
    assert first.status == status
    assert len(first.response_sample) <= SAMPLE_LIMIT
