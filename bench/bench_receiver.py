"""Benchmark: the durable receiver vs a bare Starlette endpoint, same server config, same run.

    .venv/bin/python bench/bench_receiver.py [--duration 6] [--connections 64] [--rounds 3]
        [--body-sizes 1024,small]

Each server runs as its own process under the same uvicorn configuration
(``receiver.server.server_config``: uvloop, httptools, one worker, no access log):

* **durable** — the reference receiver app (:func:`receiver.app.create_app`): verifies the Standard
  Webhooks signature, claims the event in a SQLite inbox (WAL, ``synchronous=FULL``), runs the
  handler, commits the inbox record and the demo reminder row in one transaction, and only then
  answers 200;
* **guarded** — the bare endpoint below behind ``HookproofMiddleware`` with a SQLite inbox: the
  durability layer alone (verify, claim, commit with ``synchronous=FULL`` before every 2xx);
* **bare** — a Starlette endpoint that reads the body and answers the same small JSON, nothing else;
* **no-inbox** — a diagnostic, not a product: the guarded endpoint over an inbox that stores
  nothing (every claim is a first claim, every commit succeeds at once, no thread, no file). What
  verifying, the I-JSON check and the middleware cost alone: the ceiling of guarded for any inbox;
* **minimal** — a diagnostic, not a product: the least any Python guard in front of the endpoint
  does, in a dozen lines (decode the headers, read the body, verify, parse the JSON, hand the
  body on, hold the answer until the end): no inbox, no body deadline, no limits, no problem
  answers. Where the targets sit against what a guard costs before it keeps any promise.

The load generator is ``wrk`` (C, event-driven; install with ``apt-get install -y wrk`` or
``brew install wrk``), driven by a Lua script that cycles through pre-signed requests loaded from a
file: every request of the durable run is a DISTINCT event (a duplicate would take the cheaper
duplicate path), signed moments before the run so its timestamp is within the tolerance. How many
distinct events are written is sized from a short warm-up of the bare endpoint (no guarded or
durable run is faster than it), times a margin, so the runs never cycle. Every run of one body
size uses the same requests; rounds are interleaved. Bodies are 1 KiB (the size the docs quote)
and the natural small body (about 140 bytes); each block of the output says which.

The script prints, per body size, requests/s and server CPU per request of each kind, the ratios
to bare (targets: guarded >= 70%, durable >= 65%) of the medians and, steadier when the machine's
speed drifts, of each round against the bare run just before it; the receiver's CPU budget per
request next to the bare endpoint's (CPU seconds of the server process, every thread, over the
requests served), split into the event loop's thread and the others (the SQLite inbox's writer);
and fails if any guarded or durable answer was not 2xx or if wrk ran out of
distinct requests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.wrk_load import (  # noqa: E402  (after the path set-up above)
    HOST,
    LUA,
    SECRET,
    SMALL_BODY,
    free_port,
    needed_requests,
    parse_wrk,
    request_body,
    serving,
    write_requests,
    wrk_command,
)

KINDS = ("bare", "guarded", "durable", "no-inbox", "minimal")
TARGETS = {
    "guarded": ("the same endpoint behind the middleware + SQLite inbox", 0.70),
    "durable": ("the reference app, with its transactional demo effect", 0.65),
}
"""Each measured kind: what it is, and its target share of the bare endpoint's requests/s."""
DIAGNOSTICS = {
    "no-inbox": "the middleware over an inbox that stores nothing: guarded's ceiling, no target",
    "minimal": "verify + parse + hold the answer, nothing else: any Python guard's ceiling",
}
"""Kinds measured to explain the others, reported as a share of bare without a target."""
WARMUP_S = 2
MARGIN = 2.0
"""Distinct events = the bare endpoint's warm-up rate x the run's duration x this margin."""


def serve(kind: str, port: int, db: str) -> None:
    """Run one server in the foreground (the bench starts this in a subprocess)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from receiver.app import ReceiverSettings, create_app
    from receiver.server import bind_socket
    from receiver.server import serve as run_server

    if kind == "durable":
        app = create_app(ReceiverSettings(secrets=[SECRET], db=db))
    else:

        async def webhook(request: Request) -> Response:
            await request.body()
            return JSONResponse({"event_id": request.headers["webhook-id"], "reminder": "ok"})

        async def health(request: Request) -> Response:
            return JSONResponse({"ok": True})

        middleware = []
        if kind == "minimal":
            from starlette.middleware import Middleware

            from receiver.signing import Secret, Verifier

            middleware.append(Middleware(_MinimalGuard, verifier=Verifier([Secret(SECRET)])))
        if kind in ("guarded", "no-inbox"):  # the same endpoint behind the durability layer
            from starlette.middleware import Middleware

            from receiver.inbox.sqlite import SqliteInbox
            from receiver.middleware import HookproofMiddleware
            from receiver.signing import Secret, Verifier

            verifier = Verifier([Secret(SECRET)])
            inbox = SqliteInbox(db) if kind == "guarded" else _nothing_stored()
            guard = Middleware(HookproofMiddleware, verifier=verifier, inbox=inbox)
            middleware.append(guard)
        app = Starlette(
            routes=[
                Route("/webhooks", webhook, methods=["POST"]),
                Route("/healthz", health, methods=["GET"]),
            ],
            middleware=middleware,
        )
    run_server(app, bind_socket(HOST, port), log_level="warning")


class _MinimalGuard:
    """The ``minimal`` diagnostic: what any guard must do at the least, and nothing more (no
    inbox, no deadline, no limits; a failed verification is an exception). Never a receiver."""

    def __init__(self, app: Any, verifier: Any) -> None:
        self.app, self.verifier = app, verifier

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from receiver.ijson import parse_payload

        if scope["type"] != "http" or scope["path"] != "/webhooks":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        body = (await receive())["body"]  # wrk sends each body whole, with its headers
        self.verifier.verify(body, headers)
        parse_payload(body)
        held: list[Any] = []
        handed = False

        async def replay() -> Any:
            nonlocal handed
            if handed:
                return await receive()
            handed = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def hold(message: Any) -> None:
            held.append(message)

        await self.app(scope, replay, hold)
        for message in held:
            await send(message)


def _nothing_stored() -> Any:
    """The no-inbox diagnostic's inbox: claims every event as new, commits at once, keeps
    nothing (never a receiver: it would apply every duplicate)."""
    from receiver.inbox.contract import Claim, ClaimOutcome, Inbox, InboxRecord

    class NothingStored(Inbox):
        async def claim(self, event_id: str) -> Claim:
            return Claim(ClaimOutcome.CLAIMED, event_id, token=1)

        async def commit(self, event_id: str, token: int, status: int, work: Any = ()) -> bool:
            return True

        async def release(self, event_id: str, token: int) -> bool:
            return True

        async def lookup(self, event_id: str) -> InboxRecord | None:
            return None

        async def purge(self, committed_before: Any) -> int:
            return 0

        async def close(self) -> None:
            return None

    return NothingStored()


def run_wrk(
    base: str, script: Path, requests_file: Path, duration: int, connections: int
) -> dict[str, float]:
    command = wrk_command(base, script, requests_file, duration, connections)
    result = parse_wrk(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    return {
        "rps": result.rps,
        "requests": float(result.requests),
        "non_2xx": float(result.non_2xx),
        "p99_ms": result.p99_ms,
    }


def _preflight(base: str, requests_file: Path) -> None:
    """Send the first pre-signed request once; stop with the server's answer if it is not 2xx."""
    with requests_file.open() as lines:
        event_id, timestamp, signature, body = lines.readline().rstrip("\n").split("\t", 3)
    headers = {
        "content-type": "application/json",
        "webhook-id": event_id,
        "webhook-timestamp": timestamp,
        "webhook-signature": signature,
    }
    response = httpx.post(f"{base}/webhooks", content=body.encode(), headers=headers)
    if not response.is_success:
        raise SystemExit(f"preflight answered {response.status_code}: {response.text[:300]}")


def _cpu_seconds(pid: int) -> tuple[float, float]:
    """User + system CPU seconds of a process, and of its main thread alone (the one that runs
    the event loop), from Linux ``/proc`` (NaN elsewhere)."""

    def seconds(stat: str) -> float:
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    return seconds(f"/proc/{pid}/stat"), seconds(f"/proc/{pid}/task/{pid}/stat")


def _median_run(runs: list[dict[str, float]]) -> dict[str, float]:
    return sorted(runs, key=lambda run: run["rps"])[len(runs) // 2]


def _size_name(size: int) -> str:
    return "small" if size == SMALL_BODY else f"{size} B"


def _body_sizes(text: str) -> list[int]:
    return [SMALL_BODY if part == "small" else int(part) for part in text.split(",")]


def measure(kind: str, db: str, script: Path, requests_file: Path, args: Any) -> dict[str, float]:
    """One server of ``kind``: preflight, one wrk run, and the server's CPU per request."""
    port = free_port()
    argv = [sys.executable, __file__, "--serve", kind, "--port", str(port), "--db", db]
    with serving(argv, port=port, name=kind, cwd=ROOT, start_within_s=30) as process:
        base = f"http://{HOST}:{port}"
        _preflight(base, requests_file)
        cpu_before = _cpu_seconds(process.pid)
        run = run_wrk(base, script, requests_file, args.duration, args.connections)
        cpu_after = _cpu_seconds(process.pid)
        run["cpu_us"] = (cpu_after[0] - cpu_before[0]) / run["requests"] * 1e6
        run["loop_us"] = (cpu_after[1] - cpu_before[1]) / run["requests"] * 1e6
        return run


def _per_round(runs: dict[str, list[dict[str, float]]], kind: str) -> list[float]:
    """Each round of ``kind`` against the bare run just before it (steadier than two medians)."""
    return [
        run["rps"] / bare_run["rps"] for run, bare_run in zip(runs[kind], runs["bare"], strict=True)
    ]


def bench_size(size: int, work: Path, script: Path, args: Any) -> tuple[bool, list[str]]:
    """Every kind at one body size, rounds interleaved; whether all was well, and the report."""
    label = _size_name(size)
    # Size the distinct events from a short warm-up of the bare endpoint: no guarded or durable
    # run is faster than it, so its rate (with a margin for a quieter moment) bounds them all.
    warmup = work / f"warmup-{size}.tsv"
    write_requests(warmup, 20_000, prefix="w", body_size=size)
    warm = measure("bare", str(work / f"warmup-{size}.sqlite"), script, warmup, _Short(args))
    count = needed_requests(warm["rps"], args.duration, margin=MARGIN)
    requests_file = work / f"requests-{size}.tsv"
    write_requests(requests_file, count, body_size=size)
    body_bytes = len(request_body(0, size))
    runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
    for round_number in range(args.rounds):
        for kind in KINDS:  # interleaved, so background load hits every kind alike
            db = str(work / f"{kind}-{size}-{round_number}-inbox.sqlite")  # fresh: distinct
            runs[kind].append(measure(kind, db, script, requests_file, args))
    report = [
        f"body: {label} ({body_bytes} bytes{', the figure the docs quote' if size == 1024 else ''})"
        f"; {count} distinct events (sized from a {WARMUP_S} s warm-up at {warm['rps']:.0f} req/s)"
    ]
    results = {kind: _median_run(kind_runs) for kind, kind_runs in runs.items()}
    for kind, result in results.items():
        each = ", ".join(f"{run['rps']:.0f}" for run in runs[kind])
        report.append(
            f"  {kind:8s} {result['rps']:8.0f} req/s   p99 {result['p99_ms']:7.1f} ms   "
            f"server CPU {result['cpu_us']:5.0f} us/request   "
            f"{int(result['requests'])} requests, {int(result['non_2xx'])} non-2xx   "
            f"(rounds: {each} req/s)"
        )
    bare = results["bare"]
    for kind, meaning in DIAGNOSTICS.items():
        per_round = _per_round(runs, kind)
        report.append(
            f"  ratio {kind}/bare: {results[kind]['rps'] / bare['rps']:6.1%} req/s; per round "
            f"{', '.join(f'{share:.1%}' for share in per_round)} — {meaning}"
        )
    for kind, (meaning, target) in TARGETS.items():
        ratio = results[kind]["rps"] / bare["rps"]
        cpu_ratio = bare["cpu_us"] / results[kind]["cpu_us"]
        report.append(
            f"  ratio {kind}/bare: {ratio:6.1%} req/s, {cpu_ratio:6.1%} by CPU per request "
            f"(target >= {target:.0%}) — {meaning}"
        )
        per_round = _per_round(runs, kind)
        report.append(
            f"    {kind}/bare per round (each against the bare run just before it): "
            f"{', '.join(f'{share:.1%}' for share in per_round)}; "
            f"median {statistics.median(per_round):.1%}"
        )
    budget = ", ".join(
        f"{kind} {results[kind]['cpu_us']:.0f} us (+{results[kind]['cpu_us'] - bare['cpu_us']:.0f})"
        for kind in TARGETS
    )
    report.append(
        f"  receiver CPU budget per request: bare {bare['cpu_us']:.0f} us; {budget} "
        "(server process, every thread)"
    )
    threads = ", ".join(
        f"{kind} {run['loop_us']:.0f} + {run['cpu_us'] - run['loop_us']:.0f}"
        for kind, run in results.items()
    )
    report.append(
        f"    of which the event loop's thread + the other threads (the inbox's writer): {threads}"
    )
    ok = True
    for kind in TARGETS:
        if any(run["non_2xx"] for run in runs[kind]):
            report.append(f"FAIL: {kind} answered non-2xx to distinct valid events ({label})")
            ok = False
        if any(run["requests"] > count for run in runs[kind]):
            report.append(f"FAIL: wrk cycled past the {count} distinct requests ({label})")
            ok = False
    return ok, report


class _Short:
    """The arguments of a warm-up run: the same, but :data:`WARMUP_S` seconds."""

    def __init__(self, args: Any) -> None:
        self.duration = WARMUP_S
        self.connections = args.connections


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=6, help="seconds per run")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per body size")
    parser.add_argument(
        "--body-sizes",
        default="1024,small",
        help="comma-separated body sizes in bytes, 'small' for the natural ~140-byte body",
    )
    parser.add_argument("--serve", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.db)
        return 0
    if shutil.which("wrk") is None:
        print(
            "bench_receiver: needs the 'wrk' load generator on PATH: "
            "apt-get install -y wrk (Debian/Ubuntu) or brew install wrk (macOS)",
            file=sys.stderr,
        )
        return 2
    ok = True
    reports: list[str] = []
    with tempfile.TemporaryDirectory(prefix="hookproof-bench-") as scratch:
        work = Path(scratch)
        script = work / "cycle.lua"
        script.write_text(LUA)
        for size in _body_sizes(args.body_sizes):
            size_ok, report = bench_size(size, work, script, args)
            ok = ok and size_ok
            reports.extend(report)
    print(
        f"cpus: {os.cpu_count()}  wrk: 1 thread, {args.connections} connections, "
        f"{args.duration} s per run, {args.rounds} interleaved rounds per body size (median shown)"
    )
    print("\n".join(reports))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
