"""Benchmark: the durable receiver vs a bare Starlette endpoint, same server config, same run.

    .venv/bin/python bench/bench_receiver.py [--duration 6] [--connections 64] [--rounds 3]

Each server runs as its own process under the same uvicorn configuration
(``receiver.server.server_config``: uvloop, httptools, one worker, no access log):

* **durable** — the reference receiver app (:func:`receiver.app.create_app`): verifies the Standard
  Webhooks signature, claims the event in a SQLite inbox (WAL, ``synchronous=FULL``), runs the
  handler, commits the inbox record and the demo reminder row in one transaction, and only then
  answers 200;
* **guarded** — the bare endpoint below behind ``HookproofMiddleware`` with a SQLite inbox: the
  durability layer alone (verify, claim, commit with ``synchronous=FULL`` before every 2xx);
* **bare** — a Starlette endpoint that reads the body and answers the same small JSON, nothing else.

The load generator is ``wrk`` (C, event-driven; install with ``apt-get install -y wrk`` or
``brew install wrk``), driven by a Lua script that cycles through pre-signed requests loaded from a
file: every request of the durable run is a DISTINCT event (a duplicate would take the cheaper
duplicate path), signed moments before the run so its timestamp is within the tolerance. Every run
uses the same requests; rounds are interleaved. The script prints requests/s and server CPU per
request of each, the ratios to bare (target: >= 50%), and fails if any guarded or durable answer
was not 2xx or if wrk ran out of distinct requests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.wrk_load import (  # noqa: E402  (after the path set-up above)
    HOST,
    LUA,
    SECRET,
    free_port,
    parse_wrk,
    write_requests,
    wrk_command,
)

KINDS = ("bare", "guarded", "durable")


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
        if kind == "guarded":  # the same endpoint behind the durability layer
            from starlette.middleware import Middleware

            from receiver.inbox.sqlite import SqliteInbox
            from receiver.middleware import HookproofMiddleware
            from receiver.signing import Secret, Verifier

            verifier = Verifier([Secret(SECRET)])
            guard = Middleware(HookproofMiddleware, verifier=verifier, inbox=SqliteInbox(db))
            middleware.append(guard)
        app = Starlette(
            routes=[
                Route("/webhooks", webhook, methods=["POST"]),
                Route("/healthz", health, methods=["GET"]),
            ],
            middleware=middleware,
        )
    run_server(app, bind_socket(HOST, port), log_level="warning")


def start_server(kind: str, db: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", kind, "--port", str(port), "--db", db],
        cwd=ROOT,
    )
    base = f"http://{HOST}:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the {kind} server exited with {process.returncode}")
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                return process, base
        except httpx.TransportError:
            pass
        time.sleep(0.05)  # real-time: waiting for the server process to listen
    process.kill()
    raise SystemExit(f"the {kind} server did not start")


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


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux ``/proc``; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _median_run(runs: list[dict[str, float]]) -> dict[str, float]:
    return sorted(runs, key=lambda run: run["rps"])[len(runs) // 2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=6, help="seconds per run")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--requests", type=int, default=150_000, help="distinct signed requests")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved bare/durable rounds")
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
    with tempfile.TemporaryDirectory(prefix="hookproof-bench-") as scratch:
        work = Path(scratch)
        requests_file, script = work / "requests.tsv", work / "cycle.lua"
        script.write_text(LUA)
        write_requests(requests_file, args.requests)
        runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
        for round_number in range(args.rounds):
            for kind in KINDS:  # interleaved, so background load hits every kind alike
                db = str(work / f"{kind}-{round_number}-inbox.sqlite")  # fresh: events distinct
                process, base = start_server(kind, db)
                try:
                    _preflight(base, requests_file)
                    cpu_before = _cpu_seconds(process.pid)
                    run = run_wrk(base, script, requests_file, args.duration, args.connections)
                    run["cpu_us"] = (_cpu_seconds(process.pid) - cpu_before) / run["requests"] * 1e6
                    runs[kind].append(run)
                finally:
                    process.terminate()
                    try:
                        process.wait(timeout=15)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait()
    print(
        f"cpus: {os.cpu_count()}  wrk: 1 thread, {args.connections} connections, "
        f"{args.duration} s per run, {args.rounds} interleaved rounds (median shown)"
    )
    results = {kind: _median_run(kind_runs) for kind, kind_runs in runs.items()}
    for kind, result in results.items():
        each = ", ".join(f"{run['rps']:.0f}" for run in runs[kind])
        print(
            f"{kind:8s} {result['rps']:8.0f} req/s   p99 {result['p99_ms']:7.1f} ms   "
            f"server CPU {result['cpu_us']:5.0f} us/request   "
            f"{int(result['requests'])} requests, {int(result['non_2xx'])} non-2xx   "
            f"(rounds: {each} req/s)"
        )
    bare = results["bare"]
    for kind, meaning in (
        ("guarded", "the same endpoint behind the middleware + SQLite inbox"),
        ("durable", "the reference app, with its transactional demo effect"),
    ):
        ratio = results[kind]["rps"] / bare["rps"]
        cpu_ratio = bare["cpu_us"] / results[kind]["cpu_us"]
        print(
            f"ratio {kind}/bare: {ratio:6.1%} req/s, {cpu_ratio:6.1%} by CPU per request "
            f"(target >= 50%) — {meaning}"
        )
    for kind in ("guarded", "durable"):
        if any(run["non_2xx"] for run in runs[kind]):
            print(f"FAIL: {kind} answered non-2xx to distinct valid events")
            return 1
        if any(run["requests"] > args.requests for run in runs[kind]):
            print("FAIL: wrk cycled past the distinct requests; raise --requests")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
