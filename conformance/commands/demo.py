"""``hookproof demo``: the reference receiver on a free local port, checked with every scenario
(the receiver-side ones over HTTP, the sender-side ones on the simulator in process), then
``hookproof check-sender`` against ``hookproof send`` with a compressed schedule."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from conformance.catalogue import CATALOGUE
from conformance.commands.check import exit_status, run_settings
from conformance.commands.check_sender import run_check_sender
from conformance.commands.options import report_file_options, select_option
from conformance.interrupts import run_interruptibly
from conformance.model import Harness
from conformance.reporters import ConsoleReporter
from conformance.sender_check.demo import demo_sender_settings
from conformance.session import run_sender_side
from receiver.commands.console import make_console
from receiver.commands.options import seed_option

__all__ = ["demo_command"]


@click.command("demo")
@select_option()
@report_file_options(ndjson=False)
@seed_option(None, draws="the fuzzed cases (printed in the report)")
def demo_command(
    select: tuple[str, ...], json_path: str | None, junit_path: str | None, seed: int | None
) -> int:
    """Start the reference receiver on a free local port and check it with every scenario.

    The receiver-side scenarios run over HTTP against it (the reports cover that run); the
    sender-side scenarios then run on the simulator in process, and the sender.* ones judge
    `hookproof send` from outside (check-sender), so the whole catalogue runs."""
    from conformance.demo import demo_settings, serving_reference_receiver

    out = make_console()
    with (
        tempfile.TemporaryDirectory(prefix="hookproof-demo-") as workdir,
        serving_reference_receiver(Path(workdir)) as served,
    ):
        out.print(f"reference receiver listening on {served.url} (SQLite inbox in {workdir})")
        settings = demo_settings(served).merged(
            {"select": select, "json": json_path, "junit": junit_path, "seed": seed}
        )
        receiver_side = run_settings(settings)
    # The rest of the catalogue is about the sender: run it on the simulator, in process.
    statuses = [receiver_side]
    if CATALOGUE.select(settings.select, settings.deselect, harness=Harness.S):
        out.print()
        sender_side = run_interruptibly(run_sender_side(settings, [ConsoleReporter()]))
        statuses.append(exit_status(sender_side))
    # ... and the sender.* family judges our own `hookproof send` from outside.
    if CATALOGUE.select(settings.select, settings.deselect, harness=Harness.X):
        out.print()
        with tempfile.TemporaryDirectory(prefix="hookproof-demo-sender-") as senders:
            external = demo_sender_settings(Path(senders), select=settings.select, seed=seed or 0)
            out.print("check-sender against `hookproof send` (policy: delays 0, 1, 1.5 s)")
            statuses.append(run_check_sender(external))
    return max(statuses)
