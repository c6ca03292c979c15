"""Errors attributed to the right side, over real loopback HTTP: a server that drips its answer, one
that never answers and a redirect loop each end within their bounds with the right outcome and
exit code; a receiver that closes its connections after a 500 is reported as a 500, not as a probe
fault; a wrong probe token is one line and exit 2; ``max_time`` bounds a run of slow answers.

The servers are small raw-socket HTTP/1.1 servers on 127.0.0.1 (each on its own thread and event
loop), because their misbehaviour is exactly what a well-made server library would not do. The
elapsed-time bounds are generous (a loaded machine), but far below what an unbounded wait costs.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import struct
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from conformance.cli import main
from conformance.config import CheckSettings
from conformance.exceptions import EndpointUnreachable, ProbeUnusable
from conformance.model import Severity
from conformance.results import Outcome, ScenarioResult
from conformance.session import run_check
from tests.support.raw_server import raw_server

from .support import SECRET, Collector

TOKEN = "probe-token-right-side"


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Connection:
    """What a server remembers about one connection."""

    served: list[int] = field(default_factory=list)


Handler = Callable[[Request, Connection, asyncio.StreamWriter], Awaitable[bool]]
"""Answers one request on ``writer``; returns False to close the connection without answering."""


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    method, path, headers = _head(head)
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(method, path, headers, body)


def _head(raw: bytes) -> tuple[str, str, dict[str, str]]:
    """A request head's method, path and headers (names in lower case)."""
    lines = raw.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return method, path, headers


def _answer(status: int, body: bytes = b"", extra: str = "") -> bytes:
    reason = {200: "OK", 307: "Temporary Redirect", 401: "Unauthorized", 404: "Not Found"}
    return (
        f"HTTP/1.1 {status} {reason.get(status, 'Status')}\r\ncontent-length: {len(body)}\r\n"
        f"content-type: application/json\r\n{extra}\r\n"
    ).encode() + body


@contextmanager
def serving(handler: Handler) -> Iterator[str]:
    """Serve ``handler`` on a free loopback port in a thread of its own; yields the base URL."""

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state = Connection()
        try:
            while (request := await _read_request(reader)) is not None:
                if not await handler(request, state, writer):
                    break
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    with raw_server(connection) as base:
        yield base


async def _drip(request: Request, state: Connection, writer: asyncio.StreamWriter) -> bool:
    """Every answer is a 200 whose 1000-byte body comes one byte every 0.1 s."""
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n")
    for _ in range(1000):
        await writer.drain()
        writer.write(b" ")
        await asyncio.sleep(0.1)  # real-time: the server under test drips, this is its behaviour
    return True


async def _drip_posts(request: Request, state: Connection, writer: asyncio.StreamWriter) -> bool:
    """Answers a GET at once (someone is listening) and drips every webhook's answer."""
    if request.method == "GET":
        writer.write(_answer(405))
        return True
    return await _drip(request, state, writer)


async def _silent(request: Request, state: Connection, writer: asyncio.StreamWriter) -> bool:
    """Reads the request and never answers."""
    await asyncio.Event().wait()
    return False


async def _redirect_loop(request: Request, state: Connection, writer: asyncio.StreamWriter) -> bool:
    writer.write(_answer(307, extra=f"location: {request.path}\r\n"))
    return True


def _probe_answer(request: Request, token: str) -> bytes:
    if request.headers.get("authorization") != f"Bearer {token}":
        return _answer(401, b'{"title": "bad token"}')
    return _answer(404, b'{"title": "unknown event"}')


async def _five_hundred_and_close(
    request: Request, state: Connection, writer: asyncio.StreamWriter
) -> bool:
    """Every webhook gets a 500 (keep-alive: no ``Connection: close``), after which the server
    closes the connection at once; the probe answers 404."""
    if request.path.startswith("/_hookproof/events/"):
        writer.write(_probe_answer(request, TOKEN))
        return True
    writer.write(_answer(500, b'{"title": "boom"}'))
    await writer.drain()
    return False


async def _five_hundred_then_drop(
    request: Request, state: Connection, writer: asyncio.StreamWriter
) -> bool:
    """Every webhook gets a 500 (keep-alive), and a connection that answered a 500 is dropped,
    without an answer, when its next request arrives (a worker recycled after an error). The probe
    answers 404; a GET of the webhook path 405."""
    if 500 in state.served:
        return False
    if request.path.startswith("/_hookproof/events/"):
        writer.write(_probe_answer(request, TOKEN))
    elif request.method == "GET":
        writer.write(_answer(405))
    else:
        writer.write(_answer(500, b'{"title": "boom"}'))
        state.served.append(500)
    return True


async def _guarded_probe(request: Request, state: Connection, writer: asyncio.StreamWriter) -> bool:
    if request.path.startswith("/_hookproof/events/"):
        writer.write(_probe_answer(request, TOKEN))
    else:
        writer.write(_answer(200, b'{"ok": true}'))
    return True


def _check(base: str, *extra: str) -> list[str]:
    return ["check", f"{base}/webhooks", "--secret", SECRET, "--seed", "3", *extra]


def _timed(argv: list[str]) -> tuple[int, float]:
    started = time.monotonic()
    code = main(argv)
    return code, time.monotonic() - started


def test_a_dripping_server_is_cut_at_the_timeout_and_is_not_said_to_never_answer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with serving(_drip) as base:
        code, elapsed = _timed(_check(base, "--timeout", "0.5"))
    err = capsys.readouterr().err
    assert code == 2
    assert elapsed < 10  # the body would take 100 s to drip
    assert "answered 200 but the body did not finish within 0.5 s" in err
    assert "never answered" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_silent_server_never_answered_within_the_timeout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with serving(_silent) as base:
        code, elapsed = _timed(_check(base, "--timeout", "0.5"))
    err = capsys.readouterr().err
    assert code == 2
    assert elapsed < 10
    assert "never answered (no answer within 0.5 s (timeout))" in err


def test_a_redirect_loop_is_one_3xx_answer_per_request_not_a_wait(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with serving(_redirect_loop) as base:
        code, elapsed = _timed(_check(base, "--timeout", "0.5", "--select", "signature.valid"))
    out = capsys.readouterr().out
    assert code == 1
    assert elapsed < 10
    assert "307" in out


def test_slow_webhook_answers_are_bounded_per_exchange_and_by_max_time() -> None:
    collector = Collector()
    with serving(_drip_posts) as base:
        settings = CheckSettings(
            url=f"{base}/webhooks", secrets=(SECRET,), timeout=0.3, seed=3, max_time=2.0
        )
        started = time.monotonic()
        asyncio.run(run_check(settings, [collector]))
        elapsed = time.monotonic() - started
    assert elapsed < 15  # unbounded, the catalogue's hundreds of dripped answers take hours
    finished = collector.events[-1]
    assert getattr(finished, "interrupted", "").startswith("the run's time budget")
    valid = next(r for r in collector.results if r.scenario.id == "signature.valid")
    assert valid.outcome is Outcome.FAILED
    assert "answered 200 but the body did not finish within 0.3 s" in valid.failures[0].observed


def _one_scenario(
    base: str, scenario_id: str, *, timeout: float = 2.0, probe: bool = True
) -> ScenarioResult:
    """``scenario_id`` run alone against ``base``'s webhooks (with its probe unless told)."""
    collector = Collector()
    settings = CheckSettings(
        url=f"{base}/webhooks",
        secrets=(SECRET,),
        probe=f"{base}/_hookproof/events" if probe else None,
        probe_token=TOKEN if probe else None,
        select=(scenario_id,),
        timeout=timeout,
        seed=3,
    )
    asyncio.run(run_check(settings, [collector]))
    (result,) = collector.results
    return result


@pytest.mark.parametrize("server", [_five_hundred_and_close, _five_hundred_then_drop])
def test_a_receiver_closing_connections_after_a_500_is_reported_as_a_500(server: Handler) -> None:
    with serving(server) as base:
        valid = _one_scenario(base, "signature.valid")
    assert valid.outcome is Outcome.FAILED, valid.message
    assert [f.observed.split(" in ")[0] for f in valid.failures] == [
        "500",
        "probe: unknown event (404), 0 effects; answers: 500",
    ]


async def _drop_on_odd_json(
    request: Request, state: Connection, writer: asyncio.StreamWriter
) -> bool:
    """Reads ``data`` of every webhook's JSON body before anything else, the way a Go handler's
    unchecked type assertion does: a body without it "panics", and the connection is dropped
    unanswered (net/http's recovery); other webhooks are refused 401, the probe answers 404,
    a GET of the webhook path 405."""
    if request.path.startswith("/_hookproof/events/"):
        writer.write(_probe_answer(request, TOKEN))
        return True
    if request.method == "GET":
        writer.write(_answer(405))
        return True
    try:
        document = json.loads(request.body)
        document["data"]["tenant"] = "read"
    except (ValueError, TypeError, KeyError, RecursionError):
        return False
    writer.write(_answer(401, b'{"title": "no signature matches"}'))
    return True


def test_a_dropped_connection_is_said_to_close_without_an_answer_not_just_to_fail() -> None:
    with serving(_drop_on_odd_json) as base:
        odd = _one_scenario(base, "signature.body-odd-json")
    assert odd.outcome is Outcome.FAILED, odd.message
    observed = odd.failures[0].observed
    assert observed.startswith("7 of 7 answers: no answer: RemoteProtocolError: ")
    assert "the connection closed without a complete answer" in observed


def test_the_runner_hangs_up_on_the_first_copy_once_its_request_is_written() -> None:
    """idempotency.sender-hung-up over real HTTP: the server reads the first copy whole and
    then sees the connection end (EOF) with no answer asked of it; the retries that follow on
    other connections are answered 200, and the scenario passes."""
    seen: list[str] = []

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (request := await _read_request(reader)) is not None:
                if request.method == "GET":
                    writer.write(_answer(405))
                elif not seen:
                    try:  # within a second: well before the runner's own 3 s timeout
                        rest = await asyncio.wait_for(reader.read(1), timeout=1)
                    except TimeoutError:
                        rest = b"still open"
                    seen.append("hung up" if rest == b"" else "kept open")
                    return
                else:
                    seen.append("retry")
                    writer.write(_answer(200, b'{"ok": true}'))
                await writer.drain()
        finally:
            writer.close()

    with raw_server(connection) as base:
        result = _one_scenario(base, "idempotency.sender-hung-up", timeout=3.0, probe=False)
    assert seen == ["hung up", "retry"]
    assert result.outcome is Outcome.PASSED, result.failures


async def _always_in_flight(
    request: Request, state: Connection, writer: asyncio.StreamWriter
) -> bool:
    """Every webhook is answered 503 with Retry-After, as a receiver whose claim never ends."""
    if request.method == "GET":
        writer.write(_answer(405))
    else:
        writer.write(_answer(503, b'{"title": "in flight"}', "retry-after: 1\r\n"))
    return True


def test_a_receiver_stuck_in_flight_is_said_to_answer_none_of_the_retries_2xx() -> None:
    with serving(_always_in_flight) as base:
        stuck = _one_scenario(base, "idempotency.sender-hung-up", timeout=0.5, probe=False)
    assert stuck.outcome is Outcome.FAILED
    (failure,) = [f for f in stuck.failures if "a retry within" in f.expected]
    assert re.match(
        r"none of \d+ answers over ([4-9]\d\d ms|[\d.]+ s) is 2xx; the first: 503", failure.observed
    )


def test_a_wrong_probe_token_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with serving(_guarded_probe) as base:
        argv = _check(base, "--probe", f"{base}/_hookproof/events", "--probe-token", "wrong")
        code, _elapsed = _timed(argv)
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.strip().splitlines() == [
        f"hookproof: error: the probe at {base}/_hookproof/events refused the token (401): "
        "check --probe-token"
    ]
    assert "FAILED" not in captured.out
    assert "ERROR" not in captured.out


def test_the_right_probe_token_passes_the_check_before_the_run() -> None:
    with serving(_guarded_probe) as base:
        settings = CheckSettings(
            url=f"{base}/webhooks",
            secrets=(SECRET,),
            probe=f"{base}/_hookproof/events",
            probe_token=TOKEN,
            select=("signature.valid",),
            timeout=2.0,
        )
        asyncio.run(run_check(settings, [Collector()]))  # no ProbeUnusable


def test_a_probe_at_the_wrong_prefix_is_one_error() -> None:
    async def everything_200(
        request: Request, state: Connection, writer: asyncio.StreamWriter
    ) -> bool:
        writer.write(_answer(200, b"<html>not a probe</html>"))
        return True

    with serving(everything_200) as base:
        settings = CheckSettings(
            url=f"{base}/webhooks", secrets=(SECRET,), probe=f"{base}/nope", probe_token=TOKEN
        )
        with pytest.raises(ProbeUnusable, match="without a JSON object"):
            asyncio.run(run_check(settings, [Collector()]))


def test_max_time_must_be_positive() -> None:
    from conformance.exceptions import UsageError

    with pytest.raises(UsageError, match="max-time"):
        CheckSettings(url="http://x/", secrets=(SECRET,), max_time=0).validate()
    assert json.dumps(CheckSettings(max_time=1.5).max_time) == "1.5"


def test_the_unreachable_error_names_a_503_endpoint_as_answering() -> None:
    async def always_503(request: Request, state: Connection, writer: asyncio.StreamWriter) -> bool:
        writer.write(_answer(503))
        return True

    with serving(always_503) as base:
        settings = CheckSettings(url=f"{base}/webhooks", secrets=(SECRET,), timeout=1.0)
        with pytest.raises(EndpointUnreachable) as raised:
            asyncio.run(run_check(settings, [Collector()]))
    assert "never answered" not in str(raised.value)
    assert "503" in str(raised.value)


@contextmanager
def _answering_413_early() -> Iterator[str]:
    """A receiver that answers a body over 64 KiB 413 from its headers alone, then closes the
    connection at once without reading the body (a reset, as Java's HttpServer does past its
    drain limit): a client still sending never reads the 413. Smaller requests are read and
    answered as usual (the probe 404, webhooks 200)."""

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                method, path, headers = _head(await reader.readuntil(b"\r\n\r\n"))
                length = int(headers.get("content-length", "0"))
                if length > 65536:
                    writer.write(_answer(413, b'{"title": "too large"}', "connection: close\r\n"))
                    await writer.drain()
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    break
                body = await reader.readexactly(length)
                await _guarded_probe(Request(method, path, headers, body), Connection(), writer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    # a small receive buffer: the client is still sending when the reset comes, as it is
    # against a real receiver over a real network
    with raw_server(connection, receive_buffer=16 * 1024) as base:
        yield base


def test_an_early_413_lost_to_a_reset_is_explained_not_just_no_answer() -> None:
    """Whether the reset beats the 413 to the client is the kernel's race: on a loaded machine
    the 413 sometimes arrives whole (then the scenario passes, rightly). Each run must be one of
    the two, and the lost answer, explained, must show within a few runs."""
    explained = 0
    with _answering_413_early() as base:
        settings = CheckSettings(
            url=f"{base}/webhooks",
            secrets=(SECRET,),
            probe=f"{base}/_hookproof/events",
            probe_token=TOKEN,
            select=("size.over-limit",),
            max_body=1024 * 1024,  # the body sent is twice that: more than loopback buffers hold
            timeout=5.0,
            seed=3,
        )
        for _ in range(5):
            collector = Collector()
            asyncio.run(run_check(settings, [collector]))
            (oversized,) = collector.results
            if oversized.outcome is Outcome.PASSED:  # the 413 arrived before the reset
                continue
            observed = " ".join(f.observed for f in oversized.failures)
            assert "no answer" in observed
            assert "answered early (413) and closed without reading the rest" in observed
            assert oversized.severity is Severity.SHOULD
            explained += 1
            if explained >= 2:
                break
    assert explained >= 1
