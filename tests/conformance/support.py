"""Helpers shared by the conformance tests: a secret, settings for an in-process app, functions
that run the catalogue against an ASGI app, or over HTTP against one variant of a zoo server
(Node, PHP), and return each scenario's outcome, why a Node zoo server cannot run here, and the
``check-sender`` options that judge a real sender on a seconds-scale schedule."""

from __future__ import annotations

import asyncio
import base64
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from conformance.asgi import app_client
from conformance.catalogue import CATALOGUE
from conformance.config import CheckSettings
from conformance.events import Event, RunFinished
from conformance.model import Harness
from conformance.results import Outcome, ScenarioResult
from conformance.session import run_check
from tests.conformance.broken_receivers import PROBE_TOKEN, SECOND_SECRET

SECRET = "whsec_" + base64.b64encode(b"hookproof-conformance-tests!").decode()
BASE = "http://hookproof.test"
SENDER_CHECK_FAST = ["--quiet-period", "1.5", "--slack", "0.75", "--jobs", "20", "--max-time", "90"]
"""``check-sender`` options for a sender on a seconds-scale schedule: every scenario at once."""


class Collector:
    """A reporter that keeps the results."""

    def __init__(self) -> None:
        self.results: list[ScenarioResult] = []
        self.events: list[Event] = []

    def handle(self, event: Event) -> None:
        self.events.append(event)
        if isinstance(event, RunFinished):
            self.results = list(event.results)


def app_settings(probe_token: str | None, **overrides: Any) -> CheckSettings:
    probe = (
        {"probe": f"{BASE}/_hookproof/events", "probe_token": probe_token} if probe_token else {}
    )
    base = CheckSettings(
        url=f"{BASE}/webhooks",
        secrets=(SECRET,),
        samples=3,
        seed=7,
        concurrency=4,
        patience=0,
        **probe,
    )
    return base.merged(overrides)


def refusing_app(answer: Callable[[dict[str, str]], str], status: int = 400) -> Any:
    """An ASGI app answering every request ``status`` with ``answer(request headers)``."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        body = answer(headers).encode()
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": body})

    return app


def run_in_process(app: Any, settings: CheckSettings) -> dict[str, ScenarioResult]:
    """Run the R-tagged scenarios ``settings`` select against ``app``; results by id."""
    collector = Collector()

    async def go() -> None:
        async with app_client(app, BASE) as client:
            await run_check(settings, [collector], client=client, harness=Harness.R)

    asyncio.run(go())
    return {r.scenario.id: r for r in collector.results}


def check_variant(
    root: str,
    *,
    secrets: tuple[str, ...],
    probe_token: str,
    max_body: int,
    one_connection: bool = False,
    **overrides: Any,
) -> dict[str, ScenarioResult]:
    """Run the C-tagged scenarios over real HTTP against ``{root}/webhooks``, observing effects
    through the probe at ``{root}/_hookproof/events`` (the zoo servers' layout); results by id.
    ``one_connection``: every request over one client holding one kept-alive connection (as a
    client passed in is used), not the runner's own clients."""
    settings = app_settings(
        probe_token,
        secrets=secrets,
        max_body=max_body,
        url=f"{root}/webhooks",
        probe=f"{root}/_hookproof/events",
        **overrides,
    )
    collector = Collector()

    async def run() -> None:
        if not one_connection:
            await run_check(settings, [collector], harness=Harness.C)
            return
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=1)) as client:
            await run_check(settings, [collector], client=client, harness=Harness.C)

    asyncio.run(run())
    return {r.scenario.id: r for r in collector.results}


def broken_guarantees(results: dict[str, ScenarioResult]) -> dict[str, object]:
    """The scenarios that broke a ``must`` or errored, as the runner grades them (a refusal
    answered with another 4xx than hookproof's table is a ``should``; skips are not counted: a
    scenario that does not apply to a scheme is skipped)."""
    return {
        sid: (r.outcome.value, r.message, [(f.expected, f.observed) for f in r.failures])
        for sid, r in results.items()
        if r.breaks_must or r.outcome is Outcome.ERROR
    }


def node_receiver_unavailable(folder: Path, *packages: str) -> str | None:
    """Why the Node zoo server in ``folder`` cannot run here (``None``: it can): ``node`` is
    absent, or ``packages`` are not in its ``node_modules`` and ``npm ci`` cannot install them."""
    if shutil.which("node") is None:
        return "node is not installed (the Node receivers of the zoo need node >= 18)"
    if all((folder / "node_modules" / package).is_dir() for package in packages):
        return None
    npm = shutil.which("npm")
    if npm is None:
        return f"npm is not installed and {folder}/node_modules is incomplete"
    done = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund"], cwd=folder, capture_output=True, timeout=180
    )
    if done.returncode != 0:
        return f"npm ci failed in {folder}: {done.stderr.decode(errors='replace')[-200:]}"
    return None


def other_schemes_only(scheme: str = "standard", harness: Harness = Harness.C) -> set[str]:
    """The ``harness`` scenarios that do not apply to ``scheme`` (a run under it skips them)."""
    return {s.id for s in CATALOGUE.tagged(harness) if scheme not in s.schemes}


ZOO_PROBE_TOKEN = PROBE_TOKEN
"""The probe token every zoo server is started with (the in-process broken receivers' own)."""
ZOO_SECRETS = (SECRET, SECOND_SECRET)
"""The two secrets every zoo server is started with and checked with (rotation)."""


def zoo_env(port: int, max_body: int, **extra: str) -> dict[str, str]:
    """The environment a zoo server (Node, Java, PHP) reads: both secrets, the probe token,
    the body limit and the port, plus what one stack needs of its own."""
    return {
        "SECRETS": ",".join(ZOO_SECRETS),
        "PROBE_TOKEN": ZOO_PROBE_TOKEN,
        "MAX_BODY": str(max_body),
        "PORT": str(port),
        **extra,
    }


def check_zoo_variant(
    base: str, variant: str, *, max_body: int, **overrides: Any
) -> dict[str, ScenarioResult]:
    """:func:`check_variant` on ``{base}/{variant}`` of a zoo server started with
    :func:`zoo_env` (both secrets, the zoo's probe token)."""
    return check_variant(
        f"{base}/{variant}",
        secrets=ZOO_SECRETS,
        probe_token=ZOO_PROBE_TOKEN,
        max_body=max_body,
        **overrides,
    )


def go_build(source: Path, folder: Path, zoo: str) -> tuple[Path | None, str]:
    """``source``/main.go built into ``folder`` (standard library only, its own build cache):
    the binary, or ``None`` and why the Go ``zoo`` ("receivers", "senders") cannot run here."""
    go = shutil.which("go")
    if go is None:
        return None, f"go is not installed (the Go {zoo} of the zoo need go >= 1.19)"
    binary = folder / "zoo"
    env = {**os.environ, "GOCACHE": str(folder / "gocache"), "GOFLAGS": "", "CGO_ENABLED": "0"}
    done = subprocess.run(
        [go, "build", "-o", str(binary), "main.go"],
        cwd=source,
        env=env,
        capture_output=True,
        timeout=300,
    )
    if done.returncode != 0:
        return None, f"go build failed: {done.stderr.decode(errors='replace')[-300:]}"
    return binary, ""


def jdk_unavailable(zoo: str) -> str | None:
    """Why the Java ``zoo`` ("receivers", "senders") cannot run here: no ``javac``/``java``, or
    one older than 17 (``None``: it can)."""
    for tool in ("javac", "java"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (the Java {zoo} of the zoo need a JDK >= 17)"
    version = subprocess.run(["javac", "-version"], capture_output=True, text=True, timeout=60)
    found = re.search(r"javac (\d+)", version.stdout + version.stderr)
    if found is None or int(found.group(1)) < 17:
        return f"the Java {zoo} need javac >= 17, found {version.stdout + version.stderr!r}"
    return None
