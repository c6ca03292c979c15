"""Benchmark: receiver replicas on PostgreSQL vs one on SQLite vs a bare Starlette endpoint.

    .venv/bin/python bench/bench_scaling.py [--duration 8] [--connections 32] [--dsn URL]

Every configuration is measured in the same run, on the same machine, with the same load:

* **bare** — a Starlette endpoint that reads the body and answers a small JSON (the baseline);
* **sqlite x1** — one ``hookproof receiver --db FILE`` (WAL, ``synchronous=FULL``, group commit);
* **postgres x1** — one ``hookproof receiver --db postgresql://…`` (the PostgreSQL inbox);
* **postgres x2** — two such replicas sharing one inbox schema, the load split evenly.

Servers are real processes (``hookproof receiver`` through the CLI; the bare app under the same
uvicorn configuration, ``receiver.server.serve``). The load generator is ``wrk`` (install with
``apt-get install -y wrk``), one thread per target, driven by a Lua script that cycles through
pre-signed Standard Webhooks requests read from a file: every request is a DISTINCT event (a
duplicate would take the cheaper duplicate path), signed just before the run. For two replicas,
two wrk processes run at the same time, each with half the connections and a disjoint half of the
events; requests/s are added and the p99 reported is the larger of the two (conservative). Each
configuration gets a short warm-up on other events first, and the measured set of distinct
events is sized from the warm-up's rate (times ``--margin``), so wrk never runs out of them. Both
the PostgreSQL server and the load generator share the machine's cores with the receivers, so the
numbers compare the configurations with each other, not with a production deployment. Target:
PostgreSQL x1 >= 20% of bare (a delivery costs two statements: the claim, and one commit
statement that also writes the demo effect's row; each is shared by the concurrent deliveries of
a batch).

The script prints requests/s, p99 and ratios against the bare endpoint, and fails if any durable
answer was not 2xx or if wrk ran out of distinct requests. It needs PostgreSQL at ``--dsn``
(default ``$HOOKPROOF_TEST_POSTGRES_DSN``, else ``postgresql://postgres@127.0.0.1:5432/test``);
it works in a schema of its own and drops it at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode, urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.wrk_load import (  # noqa: E402  (after the path set-up above)
    HOST,
    LUA,
    SECRET,
    WrkResult,
    free_port,
    needed_requests,
    parse_wrk,
    serving,
    write_requests,
    wrk_command,
)

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
WARMUP_S = 2
PG_TARGET = 0.20
WARMUP_EVENTS = 60_000
"""Distinct events of the warm-up (more than any configuration serves in WARMUP_S here)."""


def serve_bare(port: int) -> None:
    """The baseline: a bare Starlette endpoint under the receiver's uvicorn configuration."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from receiver.server import bind_socket, serve

    async def webhook(request: Request) -> Response:
        await request.body()
        return JSONResponse({"event_id": request.headers["webhook-id"], "reminder": "recorded"})

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    app = Starlette(
        routes=[
            Route("/webhooks", webhook, methods=["POST"]),
            Route("/healthz", health, methods=["GET"]),
        ]
    )
    serve(app, bind_socket(HOST, port), log_level="warning")


@contextlib.contextmanager
def server(kind: str, db: str | None = None) -> Iterator[str]:
    """Start one server process, wait for /healthz, yield its base URL, stop it."""
    port = free_port()
    if kind == "bare":
        argv = [sys.executable, __file__, "--serve-bare", str(port)]
    else:
        assert db is not None
        argv = [
            sys.executable,
            "-c",
            "from conformance.cli import run; run()",
            "receiver",
            "--port",
            str(port),
            "--db",
            db,
            "--log-level",
            "warning",
        ]
    env = {**os.environ, "HOOKPROOF_SECRET": SECRET}
    with serving(argv, port=port, name=kind, cwd=ROOT, env=env):
        yield f"http://{HOST}:{port}"


def load(
    bases: list[str], script: Path, requests: Path, seconds: int, connections: int
) -> WrkResult:
    """Run wrk against every base at once (the connections split evenly); combine the results."""
    share = max(1, connections // len(bases))
    processes = [
        subprocess.Popen(
            wrk_command(base, script, requests, seconds, share, stride=len(bases), offset=offset),
            stdout=subprocess.PIPE,
            text=True,
        )
        for offset, base in enumerate(bases)
    ]
    results = [parse_wrk(process.communicate()[0]) for process in processes]
    return WrkResult(
        rps=sum(r.rps for r in results),
        requests=sum(r.requests for r in results),
        non_2xx=sum(r.non_2xx for r in results),
        p99_ms=max(r.p99_ms for r in results),
        socket_errors="; ".join(r.socket_errors for r in results if r.socket_errors),
    )


def with_parameters(dsn: str, **parameters: str) -> str:
    parts = urlsplit(dsn)
    query = "&".join(q for q in (parts.query, urlencode(parameters)) if q)
    return urlunsplit(parts._replace(query=query))


def drop_schema(dsn: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=8, help="measured seconds per run")
    parser.add_argument("--connections", type=int, default=32, help="wrk connections in total")
    parser.add_argument(
        "--margin",
        type=float,
        default=2.5,
        help="distinct events per run = warm-up req/s x duration x margin",
    )
    parser.add_argument("--dsn", default=os.environ.get("HOOKPROOF_TEST_POSTGRES_DSN", DEFAULT_DSN))
    parser.add_argument("--serve-bare", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_bare:
        serve_bare(args.serve_bare)
        return 0
    if shutil.which("wrk") is None:
        print("bench_scaling: needs 'wrk' on PATH: apt-get install -y wrk", file=sys.stderr)
        return 2
    schema = f"hp_bench_{uuid.uuid4().hex[:8]}"
    results: dict[str, WrkResult] = {}
    sizes: dict[str, int] = {}
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="hookproof-scaling-") as scratch:
        work = Path(scratch)
        script = work / "cycle.lua"
        script.write_text(LUA)
        configurations: list[tuple[str, str, list[str | None]]] = [
            ("bare", "bare", [None]),
            ("sqlite x1", "receiver", [str(work / "inbox.sqlite")]),
            (
                "postgres x1",
                "receiver",
                [with_parameters(args.dsn, schema=schema + "_1", application_name="hp-bench-1")],
            ),
            (
                "postgres x2",
                "receiver",
                [
                    with_parameters(args.dsn, schema=schema + "_2", application_name="hp-bench-a"),
                    with_parameters(args.dsn, schema=schema + "_2", application_name="hp-bench-b"),
                ],
            ),
        ]
        try:
            for number, (name, kind, dbs) in enumerate(configurations):
                warmup, measured = work / f"warmup{number}.tsv", work / f"run{number}.tsv"
                write_requests(warmup, WARMUP_EVENTS, prefix=f"w{number}_")
                with contextlib.ExitStack() as stack:
                    bases = []
                    for db in dbs:  # one after the other: each migrates, then serves
                        bases.append(stack.enter_context(server(kind, db)))
                    warm = load(bases, script, warmup, WARMUP_S, args.connections)
                    if warm.requests > WARMUP_EVENTS:
                        failures.append(f"{name}: the warm-up cycled past its distinct events")
                    # The measured set is sized from the warm-up's rate, with a margin.
                    count = needed_requests(warm.rps, args.duration, args.margin)
                    write_requests(measured, count, prefix=f"m{number}_")
                    result = load(bases, script, measured, args.duration, args.connections)
                results[name] = result
                sizes[name] = count
                if kind != "bare" and result.non_2xx:
                    failures.append(f"{name}: {result.non_2xx} non-2xx answers to distinct events")
                if result.requests > count:
                    failures.append(
                        f"{name}: wrk cycled past the {count} distinct events; raise --margin"
                    )
        finally:
            for suffix in ("_1", "_2"):
                drop_schema(args.dsn, schema + suffix)
    baseline = results["bare"]
    print(
        f"cpus: {os.cpu_count()}  wrk: 1 thread per target, {args.connections} connections in "
        f"total, {args.duration} s measured after {WARMUP_S} s warm-up, distinct events"
    )
    print(
        f"{'configuration':14s} {'req/s':>9s} {'vs bare':>8s} {'p99 ms':>8s} {'requests':>9s}"
        f" {'distinct':>9s}"
    )
    for name, result in results.items():
        print(
            f"{name:14s} {result.rps:9.0f} {result.rps / baseline.rps:8.1%} "
            f"{result.p99_ms:8.1f} {result.requests:9d} {sizes[name]:9d}"
            + (f"  socket errors: {result.socket_errors}" if result.socket_errors else "")
        )
    sqlite, pg1, pg2 = results["sqlite x1"], results["postgres x1"], results["postgres x2"]
    print(f"postgres x1 / bare: {pg1.rps / baseline.rps:.1%} (target >= {PG_TARGET:.0%})")
    print(f"postgres x2 / sqlite x1: {pg2.rps / sqlite.rps:.2f}x requests/s")
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
