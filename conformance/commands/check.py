"""``hookproof check URL``: which delivery guarantees a webhook endpoint keeps.

The command turns its flags into :class:`~conformance.config.CheckSettings` (flags override the
config file), runs the engine through :func:`~conformance.session.run_check` and returns the exit
status: 0 no ``must`` failed and nothing errored (``should`` failures are reported, not fatal), 1
a ``must`` failed or a scenario errored, 2 a usage error or
an endpoint that never answered (raised as a :class:`ConformanceError`, printed by the root CLI
as one line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from conformance.answers import PRESETS, resolve_answers
from conformance.commands.options import (
    deselect_option,
    header_option,
    report_file_options,
    select_option,
)
from conformance.config import CheckSettings, load_config
from conformance.exceptions import UsageError
from conformance.interrupts import run_interruptibly
from conformance.reporters import (
    ConsoleReporter,
    JsonReporter,
    JUnitReporter,
    NdjsonReporter,
    Reporter,
)
from conformance.results import Summary
from conformance.session import run_check
from receiver.commands.options import (
    max_time_option,
    probe_token_option,
    scheme_option,
    secret_option,
    seed_option,
    timeout_option,
    verbose_option,
    warn_about_secrets,
)
from receiver.durations import DURATION

__all__ = ["check_command", "exit_status", "file_reporters", "run_settings"]


def exit_status(summary: Summary) -> int:
    """0 when no ``must`` failed and nothing errored (skips and ``should`` failures allowed),
    else 1."""
    return 0 if summary.ok else 1


def file_reporters(
    *, json: str | None = None, junit: str | None = None, ndjson: str | None = None
) -> list[Reporter]:
    """The JSON, JUnit and NDJSON reporters asked for; shared by every command that writes
    reports. A path that cannot be a report file (a folder, or in a folder that does not exist)
    is a :class:`UsageError` now, before the run, not after it."""
    reporters: list[Reporter] = []
    kinds = ((json, JsonReporter), (junit, JUnitReporter), (ndjson, NdjsonReporter))
    for path, kind in kinds:
        if path:
            target = Path(path)
            if target.is_dir():
                raise UsageError(f"cannot write the report {path!r}: it is a folder, not a file")
            parent = target.resolve().parent
            if not parent.is_dir():
                raise UsageError(f"cannot write the report {path!r}: {parent} does not exist")
            reporters.append(kind(path))
    return reporters


def run_settings(settings: CheckSettings) -> int:
    """Validate ``settings``, run the check with the console and file reporters, give the exit
    status."""
    settings = settings.validate()
    reporters = [
        ConsoleReporter(verbose=settings.verbose),
        *file_reporters(json=settings.json, junit=settings.junit, ndjson=settings.ndjson),
    ]
    warn_about_secrets(settings.scheme, settings.secrets)
    try:
        summary = run_interruptibly(run_check(settings, reporters))
    except OSError as error:
        raise UsageError(f"cannot write a report: {error.strerror or error}") from None
    return exit_status(summary)


@click.command("check")
@click.argument("url", required=False)
@secret_option()
@scheme_option(
    None,
    help="The signing scheme the partner's platform uses (default: the config's, or standard).",
)
@click.option(
    "--probe",
    default=None,
    metavar="URL_PREFIX",
    help="Probe prefix: GET {prefix}/{event_id} reports effects.",
)
@probe_token_option()
@header_option()
@select_option()
@deselect_option()
@timeout_option(default_text="5")
@click.option(
    "--concurrency",
    type=click.IntRange(min=2),
    default=None,
    help="Copies sent at once by the concurrent-duplicate scenarios (default 8).",
)
@click.option(
    "--rate-limit",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="At most this many requests per second.",
)
@click.option(
    "--wait-for-endpoint",
    type=DURATION,
    default=None,
    help="Retry refused connections, timeouts and 503 for up to this long first (seconds, or "
    "30s, 2m).",
)
@max_time_option()
@seed_option(None, draws="the fuzzed cases (printed in the report)")
@click.option(
    "--tolerance",
    type=click.IntRange(min=0),
    default=None,
    help="The receiver's timestamp tolerance in seconds (default 300).",
)
@click.option(
    "--samples",
    type=click.IntRange(min=1),
    default=None,
    help="Deliveries measured by the latency scenario (default 20).",
)
@click.option(
    "--patience",
    type=DURATION,
    default=None,
    help="Real time waited before the late duplicate and the redrive copy, e.g. 30s, 10m, 2h "
    "(default 1s; a short patience cannot prove a dedupe record lasts longer).",
)
@click.option(
    "--settle",
    type=DURATION,
    default=None,
    help="How long a committed event's effects may take to show on the probe, for a receiver "
    "whose durable queue applies them after it answers, e.g. 2s (default 0: they show with "
    "the 2xx).",
)
@click.option(
    "--max-body",
    type=click.IntRange(min=1),
    default=None,
    metavar="BYTES",
    help="The receiver's body limit: a body twice as large must get 413 (size.over-limit).",
)
@click.option(
    "--config",
    "config_path",
    default=None,
    metavar="FILE",
    help="hookproof.toml or pyproject.toml ([tool.hookproof]).",
)
@click.option(
    "--event-template",
    default=None,
    metavar="FILE",
    help="JSON payload the platform sends ({{event_id}}, {{occurred_at}}).",
)
@report_file_options()
@click.option(
    "--answers",
    type=click.Choice(sorted(PRESETS)),
    default=None,
    help="The refusal codes the platform's sender relies on, as a preset (stripe: 400 to every "
    "refusal); declared codes are must. Finer: an [answers] table in the config.",
)
@verbose_option(shows="every reproduction of a failure, not only the first")
@click.option(
    "--show-secrets",
    is_flag=True,
    default=None,
    help="Show signatures and the probe token in reproductions.",
)
def check_command(
    url: str | None,
    secrets: tuple[str, ...],
    scheme: str | None,
    probe: str | None,
    probe_token: str | None,
    headers: tuple[tuple[str, str], ...],
    select: tuple[str, ...],
    deselect: tuple[str, ...],
    timeout: float | None,
    concurrency: int | None,
    rate_limit: float | None,
    wait_for_endpoint: float | None,
    max_time: float | None,
    seed: int | None,
    tolerance: int | None,
    samples: int | None,
    patience: float | None,
    settle: float | None,
    max_body: int | None,
    config_path: str | None,
    event_template: str | None,
    json_path: str | None,
    junit_path: str | None,
    ndjson_path: str | None,
    answers: str | None,
    verbose: bool | None,
    show_secrets: bool | None,
) -> int:
    """Check which delivery guarantees the webhook endpoint at URL keeps."""
    flags: dict[str, Any] = {
        "url": url,
        "secrets": secrets,
        "scheme": scheme,
        "probe": probe,
        "probe_token": probe_token,
        "headers": headers,
        "select": select,
        "deselect": deselect,
        "timeout": timeout,
        "concurrency": concurrency,
        "rate_limit": rate_limit,
        "wait_for_endpoint": wait_for_endpoint,
        "max_time": max_time,
        "seed": seed,
        "tolerance": tolerance,
        "samples": samples,
        "patience": patience,
        "settle": settle,
        "max_body": max_body,
        "event_template": event_template,
        "json": json_path,
        "junit": junit_path,
        "ndjson": ndjson_path,
        "answers": resolve_answers(answers, "--answers") if answers else None,
        "verbose": verbose or None,
        "show_secrets": show_secrets or None,
    }
    settings = CheckSettings().merged(load_config(config_path)).merged(flags)
    return run_settings(settings)
