"""``hookproof sandbox``: the sender simulator against a developer's local app, in the terminal and
in a local web dashboard.

Everything is validated before anything runs (URL, secrets, templates, faults, deadline, database,
the dashboard's port), so a bad option is one line and exit status 2. Then the command prints a
live line for every attempt and transition, reads commands from stdin (see
:mod:`sender_sim.sandbox.terminal`; ``quit`` or the end of input ends it, exit status 0) and,
unless ``--no-dashboard``, serves :mod:`sender_sim.sandbox.web` on ``127.0.0.1`` only — all three
on one event loop over one :class:`~sender_sim.sandbox.engine.SandboxEngine`. Standard input is
read by a daemon thread that hands lines to the loop, so a blocked read never holds the process
open.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from datetime import timedelta
from typing import Any

import click
import uvicorn

from receiver.commands.console import make_console
from receiver.commands.options import required_secrets, warn_about_secrets
from receiver.redaction import shown_url
from receiver.server import LOOPBACK, bind_socket, server_config
from sender_sim.commands.options import (
    db_option,
    endpoint_id_option,
    endpoint_named,
    policy_option,
    scheme_option,
    secret_option,
    seed_option,
)
from sender_sim.commands.support import (
    check_url,
    delivery_client,
    open_store,
    parse_duration,
    session_clock,
)
from sender_sim.exceptions import ConfigurationError
from sender_sim.faults import Fault
from sender_sim.policy import policy_named
from sender_sim.sandbox.engine import SandboxEngine, SandboxEvent
from sender_sim.sandbox.templates import TemplateSet, load_templates
from sender_sim.sandbox.terminal import SandboxShell, interact
from sender_sim.sandbox.web import create_dashboard
from sender_sim.simulator import Simulator
from sender_sim.store import SQLiteStore

__all__ = ["PROMPT", "prompted", "sandbox_command", "stream_lines"]


async def stream_lines(stream: Iterable[str]) -> AsyncIterator[str]:
    """The lines of a blocking text stream, read by a daemon thread, as an async iterator."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def put(item: str | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop may be closed at exit
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def read() -> None:
        try:
            for line in stream:
                put(line)
        except (OSError, ValueError):
            pass
        finally:
            put(None)

    threading.Thread(target=read, name="hookproof-sandbox-stdin", daemon=True).start()
    while (line := await queue.get()) is not None:
        yield line


PROMPT = "sandbox> "


async def prompted(lines: AsyncIterator[str], write: Callable[[str], None]) -> AsyncIterator[str]:
    """``lines``, writing :data:`PROMPT` first and again after each line has been handled."""
    write(PROMPT)
    async for line in lines:
        yield line
        write(PROMPT)


@click.command("sandbox")
@click.option(
    "--forward-to",
    "url",
    required=True,
    metavar="URL",
    help="Your app's webhook URL, e.g. http://127.0.0.1:8000/webhooks.",
)
@secret_option
@scheme_option
@click.option(
    "--template",
    "template_file",
    default=None,
    metavar="FILE",
    help="JSON event templates, added to the built-in ones.",
)
@click.option(
    "--deadline",
    default="24h",
    show_default=True,
    help="Default deadline of a published event, from its publication (e.g. 30m, 2h).",
)
@policy_option
@click.option(
    "--fault",
    "faults",
    multiple=True,
    metavar="NAME[:k=v,…]",
    help="Start with this fault on (repeatable); toggle later with `fault on|off`.",
)
@seed_option
@click.option(
    "--virtual-time/--real-time",
    "virtual",
    default=True,
    show_default=True,
    help="Virtual: retries happen at once in simulated time; real: wait for them.",
)
@db_option
@click.option(
    "--dashboard-port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Dashboard port on 127.0.0.1 (0: any free port).",
)
@click.option("--no-dashboard", is_flag=True, help="Terminal only, no web dashboard.")
@endpoint_id_option
def sandbox_command(
    url: str,
    secrets: tuple[str, ...],
    scheme: str,
    template_file: str | None,
    deadline: str,
    policy_name: str,
    faults: tuple[str, ...],
    seed: int,
    virtual: bool,
    db: str,
    dashboard_port: int,
    no_dashboard: bool,
    endpoint_id: str | None,
) -> int:
    """Run the sender simulator against your local app: publish events from templates, watch
    every attempt live, toggle faults, browse the DLQ and redrive (terminal + web dashboard).

    Commands are read from standard input; type `help`. `quit` or end of input leaves.
    """
    check_url(url, "--forward-to")
    keys = required_secrets(secrets)
    warn_about_secrets(scheme, keys)
    default_deadline = parse_duration(deadline)
    if default_deadline <= timedelta(0):
        raise ConfigurationError(f"--deadline {deadline!r} must be a positive duration")
    templates = load_templates(template_file)
    for spec in faults:
        Fault.parse(spec)
    policy = policy_named(policy_name)
    store = open_store(db)
    sock = None if no_dashboard else bind_socket(LOOPBACK, dashboard_port)
    try:
        asyncio.run(
            _sandbox(
                store=store,
                store_path=db,
                url=url,
                keys=keys,
                scheme=scheme,
                templates=templates,
                deadline=default_deadline,
                policy_name=policy.name,
                faults=faults,
                seed=seed,
                virtual=virtual,
                endpoint_id=endpoint_named(endpoint_id, url),
                sock=sock,
            )
        )
    finally:
        store.close()
        if sock is not None:
            sock.close()
    return 0


async def _until_done(
    session: Coroutine[Any, Any, None], serving: asyncio.Task[None] | None
) -> None:
    """Run the interactive session; stop it early if the dashboard server ends (Ctrl-C)."""
    task = asyncio.create_task(session)
    watched: set[asyncio.Future[None]] = {task} if serving is None else {task, serving}
    await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if not task.cancelled():
        task.result()


async def _sandbox(
    *,
    store: SQLiteStore,
    store_path: str,
    url: str,
    keys: tuple[str, ...],
    scheme: str,
    templates: TemplateSet,
    deadline: timedelta,
    policy_name: str,
    faults: tuple[str, ...],
    seed: int,
    virtual: bool,
    endpoint_id: str,
    sock: socket.socket | None,
) -> None:
    async with delivery_client() as client:
        sim = Simulator(
            store,
            clock=session_clock(store, virtual=virtual),
            policy=policy_named(policy_name),
            client=client,
            seed=seed,
        )
        sim.add_endpoint(endpoint_id, url, keys, scheme=scheme)
        engine = SandboxEngine(
            sim,
            endpoint_id=endpoint_id,
            templates=templates,
            deadline=deadline,
            fault_specs=faults,
        )
        out = make_console()

        def show(event: SandboxEvent) -> None:
            out.print(event.text)

        engine.subscribe(show)
        out.print(
            f"hookproof sandbox: forwarding to {shown_url(url)} (scheme {scheme}, "
            f"policy {policy_name}, {'virtual' if virtual else 'real'} time, database {store_path})"
        )
        server: uvicorn.Server | None = None
        serving: asyncio.Task[None] | None = None
        if sock is not None:
            server = uvicorn.Server(server_config(create_dashboard(engine), log_level="warning"))
            serving = asyncio.create_task(server.serve(sockets=[sock]))
            out.print(f"dashboard: http://{LOOPBACK}:{sock.getsockname()[1]}/")
        active = [name for name, spec in engine.faults().items() if spec]
        if active:
            out.print(f"faults on: {', '.join(active)}")
        out.print("Type help for commands; quit (or end of input) leaves.")
        runner = asyncio.create_task(engine.run())
        shell = SandboxShell(engine, out.print)
        try:
            lines = stream_lines(sys.stdin)
            if sys.stdin.isatty():  # an interactive terminal gets a prompt; a pipe does not
                lines = prompted(lines, lambda text: out.print(text, end=""))
            await _until_done(interact(shell, lines), serving)
        finally:
            engine.stop()
            await runner
            if server is not None and serving is not None:
                server.should_exit = True
                await serving
        out.print("sandbox closed")
