"""``hookproof check-sender``: judge a real webhook sender against the retry policy it declares.

The flags become :class:`~conformance.sender_check.SenderCheckSettings`; the run goes through
:func:`~conformance.sender_check.run_sender_check` with the reporters of ``hookproof check``
(console, JSON, JUnit) plus NDJSON, and the exit status is the same: 0 every selected scenario
passed, 1 some failed or errored, 2 a usage error (a nonexistent trigger command, a bad policy
file, an address it cannot listen on), printed by the root CLI as one line before any scenario.
"""

from __future__ import annotations

import click

from conformance.commands.check import exit_status, file_reporters
from conformance.commands.options import deselect_option, report_file_options, select_option
from conformance.exceptions import UsageError
from conformance.interrupts import run_interruptibly
from conformance.reporters import ConsoleReporter, Reporter
from conformance.sender_check import SenderCheckSettings, run_sender_check
from receiver.commands.console import make_console
from receiver.commands.options import (
    max_time_option,
    scheme_option,
    secret_option,
    seed_option,
    verbose_option,
)
from receiver.durations import POSITIVE_DURATION

__all__ = ["check_sender_command", "run_check_sender"]


def run_check_sender(
    settings: SenderCheckSettings,
    *,
    json_path: str | None = None,
    junit_path: str | None = None,
    ndjson_path: str | None = None,
    verbose: bool = False,
) -> int:
    """Run the sender check with the console and file reporters; the exit status. Without
    ``verbose`` the console shows, of each failure's timeline, the attempts it names."""
    reporters: list[Reporter] = [
        ConsoleReporter(verbose=verbose),
        *file_reporters(json=json_path, junit=junit_path, ndjson=ndjson_path),
    ]
    out = make_console()
    try:
        summary = run_interruptibly(run_sender_check(settings, reporters, announce=out.print))
    except OSError as error:
        raise UsageError(f"cannot write a report: {error.strerror or error}") from None
    return exit_status(summary)


@click.command("check-sender")
@secret_option()
@scheme_option(help="The signing scheme the sender uses.")
@click.option(
    "--trigger",
    default=None,
    metavar="COMMAND",
    help="Shell command run once per scenario to make the sender emit one event to "
    "$HOOKPROOF_TARGET_URL (also set: HOOKPROOF_SCENARIO, HOOKPROOF_SECRET). Without it, "
    "each URL is printed and the first request awaited (manual mode).",
)
@click.option(
    "--listen",
    default="127.0.0.1:0",
    show_default=True,
    metavar="HOST:PORT",
    help="Where hookproof's scripted endpoint listens (port 0: a free one).",
)
@click.option(
    "--public-url",
    default=None,
    metavar="URL",
    help="The base URL the sender must use, when it differs from --listen (a tunnel).",
)
@click.option(
    "--policy",
    default="strict",
    show_default=True,
    metavar="strict|schedule|FILE",
    help="The retry policy the sender declares: a built-in profile or a TOML policy file.",
)
@click.option(
    "--slack",
    type=POSITIVE_DURATION,
    default=None,
    help="Seconds of slack (default max(0.5 s, 10 %)).",
)
@click.option(
    "--max-skew",
    type=POSITIVE_DURATION,
    default=30.0,
    show_default=True,
    help="Seconds a signed timestamp may be from arrival.",
)
@click.option(
    "--quiet-period",
    type=POSITIVE_DURATION,
    default=5.0,
    show_default=True,
    help="Seconds without a new attempt that end a scenario.",
)
@click.option(
    "--first-attempt-within",
    "trigger_start",
    type=POSITIVE_DURATION,
    default=10.0,
    show_default=True,
    help="Seconds the first attempt may take to arrive after the trigger (plus the schedule's "
    "first delay and the slack).",
)
@max_time_option()
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Scenarios run at once.",
)
@select_option()
@deselect_option()
@report_file_options()
@seed_option(draws="the run (recorded in the reports; check-sender draws nothing at random)")
@verbose_option(shows="every attempt of a failure's timeline, not only those it names")
def check_sender_command(
    secrets: tuple[str, ...],
    scheme: str,
    trigger: str | None,
    listen: str,
    public_url: str | None,
    policy: str,
    slack: float | None,
    max_skew: float,
    quiet_period: float,
    trigger_start: float,
    max_time: float | None,
    jobs: int,
    select: tuple[str, ...],
    deselect: tuple[str, ...],
    json_path: str | None,
    junit_path: str | None,
    ndjson_path: str | None,
    seed: int,
    verbose: bool | None,
) -> int:
    """Judge a real webhook sender against the retry policy it declares."""
    settings = SenderCheckSettings(
        secrets=secrets,
        trigger=trigger,
        scheme=scheme,
        listen=listen,
        public_url=public_url,
        policy=policy,
        slack=slack,
        max_skew=max_skew,
        quiet_period=quiet_period,
        trigger_start=trigger_start,
        max_time=max_time,
        jobs=jobs,
        select=select,
        deselect=deselect,
        seed=seed,
    )
    return run_check_sender(
        settings,
        json_path=json_path,
        junit_path=junit_path,
        ndjson_path=ndjson_path,
        verbose=bool(verbose),
    )
