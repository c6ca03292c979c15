"""What the HTTP benchmarks share: distinct pre-signed requests, the wrk Lua script, wrk's output.

The load generator is ``wrk`` (C, event-driven; ``apt-get install -y wrk`` or ``brew install
wrk``), so the generator is not the bottleneck. It replays requests signed just before the run
(inside the 300 s tolerance) from a file, one distinct event per line, so that every request takes
the receiver's full path (a duplicate would take the cheaper duplicate path). With a stride and an
offset, several wrk processes take disjoint shares of the same file.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "HOST",
    "LUA",
    "SECRET",
    "SMALL_BODY",
    "WrkResult",
    "free_port",
    "needed_requests",
    "parse_wrk",
    "request_body",
    "serving",
    "write_requests",
    "wrk_command",
]

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
HOST = "127.0.0.1"

LUA = r"""
-- Cycles through pre-signed requests, one per line: id \t timestamp \t signature \t body.
-- Arguments: the file, a stride and an offset (several wrk processes take disjoint shares).
local requests = {}
local index = 0
local stride = 1

function init(args)
  stride = tonumber(args[2]) or 1
  index = tonumber(args[3]) or 0
  for line in io.lines(args[1]) do
    local id, ts, sig, body = line:match("^([^\t]+)\t([^\t]+)\t([^\t]+)\t(.*)$")
    requests[#requests + 1] = wrk.format("POST", "/webhooks", {
      ["content-type"] = "application/json",
      ["webhook-id"] = id,
      ["webhook-timestamp"] = ts,
      ["webhook-signature"] = sig,
    }, body)
  end
end

function request()
  local r = requests[(index % #requests) + 1]
  index = index + stride
  return r
end
"""


SMALL_BODY: Final = 0
"""``body_size`` for the natural, small body (about 150 bytes: type, timestamp, three fields)."""


def request_body(n: int, body_size: int = SMALL_BODY) -> str:
    """The JSON body of event ``n``; with a ``body_size`` it is padded (a ``note`` field) to
    exactly that many bytes."""

    def encoded(note: str | None) -> str:
        data: dict[str, object] = {"renewal_id": f"ren_{n}", "customer": "cus_4711", "days_left": 3}
        if note is not None:
            data["note"] = note
        document = {
            "type": "renewal.reminder_due",
            "timestamp": "2026-01-01T09:57:50.123456Z",
            "data": data,
        }
        return json.dumps(document, separators=(",", ":"))

    if body_size == SMALL_BODY:
        return encoded(None)
    padding = body_size - len(encoded(""))
    if padding < 0:
        raise ValueError(f"a body cannot be as small as {body_size} bytes")
    body = encoded("x" * padding)
    assert len(body) == body_size, (len(body), body_size)
    return body


def write_requests(path: Path, count: int, prefix: str = "", body_size: int = SMALL_BODY) -> None:
    """``count`` distinct events signed now with :data:`SECRET`, one per line for :data:`LUA`
    (bodies of :func:`request_body`)."""
    from receiver.signing import Secret, Verifier

    signer = Verifier([Secret(SECRET)])
    now = int(time.time())
    with path.open("w") as out:
        for n in range(count):
            event_id = f"evt_{prefix}{n:08d}"
            body = request_body(n, body_size)
            headers = signer.sign(body.encode(), event_id=event_id, timestamp=now)
            out.write(f"{event_id}\t{now}\t{headers['webhook-signature']}\t{body}\n")


def needed_requests(warmup_rps: float, seconds: int, margin: float = 2.0) -> int:
    """How many distinct events a run of ``seconds`` needs, sized from a warm-up's rate with a
    ``margin`` (a warmed-up server runs faster than its warm-up did)."""
    return max(1_000, int(warmup_rps * seconds * margin))


def free_port() -> int:
    """A loopback port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def wrk_command(
    base: str,
    script: Path,
    requests: Path,
    seconds: int,
    connections: int,
    *,
    stride: int = 1,
    offset: int = 0,
) -> list[str]:
    """One single-threaded wrk run of ``script`` over ``requests`` against ``base``."""
    return [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{seconds}s",
        "--latency",
        "-s",
        str(script),
        base,
        "--",
        str(requests),
        str(stride),
        str(offset),
    ]


@dataclass(frozen=True)
class WrkResult:
    """What one wrk run reports."""

    rps: float
    requests: int
    non_2xx: int
    p99_ms: float
    socket_errors: str


def parse_wrk(output: str) -> WrkResult:
    """Read requests/s, totals, non-2xx answers, socket errors and the p99 from wrk's output."""
    rate = re.search(r"Requests/sec:\s+([\d.]+)", output)
    total = re.search(r"(\d+) requests in", output)
    non_2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    errors = re.search(r"Socket errors:(.*)", output)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", output)
    if not rate or not total or not p99:
        raise SystemExit(f"cannot read wrk's output:\n{output}")
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    return WrkResult(
        rps=float(rate.group(1)),
        requests=int(total.group(1)),
        non_2xx=int(non_2xx.group(1)) if non_2xx else 0,
        p99_ms=float(p99.group(1)) * scale[p99.group(2)],
        socket_errors=errors.group(1).strip() if errors else "",
    )


@contextlib.contextmanager
def serving(
    argv: Sequence[str],
    *,
    port: int,
    name: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    start_within_s: float = 60,
) -> Iterator[subprocess.Popen[bytes]]:
    """Start a server process (``argv``, listening on ``port``), wait until its ``/healthz``
    answers 200, yield the process, and stop it (``terminate``, then ``kill`` after 15 s)."""
    import httpx

    process = subprocess.Popen(list(argv), cwd=cwd, env=None if env is None else dict(env))
    base = f"http://{HOST}:{port}"
    try:
        deadline = time.monotonic() + start_within_s
        while True:
            if process.poll() is not None:
                raise SystemExit(f"the {name} server exited with {process.returncode}")
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"the {name} server did not start")
            time.sleep(0.05)  # real-time: waiting for the server process to listen
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
