"""The conformance commands of the ``hookproof`` CLI: ``check``, ``scenarios`` and ``demo``.

Each command turns its flags into :class:`~conformance.config.CheckSettings` (flags override the
config file), runs the engine through :func:`~conformance.session.run_check` and returns the exit
status: 0 every selected scenario passed, 1 at least one failed (or errored), 2 a usage error or
an endpoint that never answered (raised as a :class:`ConformanceError`, printed by the root CLI
as one line).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from conformance.catalogue import CATALOGUE
from conformance.config import CheckSettings, load_config
from conformance.docs import catalogue_markdown, scenario_records
from conformance.exceptions import UsageError
from conformance.model import Harness
from conformance.reporters import ConsoleReporter, JsonReporter, JUnitReporter, Reporter
from conformance.results import Summary
from conformance.session import run_check, run_sender_side

__all__ = ["check_command", "demo_command", "exit_status", "scenarios_command"]


def exit_status(summary: Summary) -> int:
    """0 when every selected scenario passed (skips allowed), else 1."""
    return 0 if summary.ok else 1


def _reporters(settings: CheckSettings) -> list[Reporter]:
    reporters: list[Reporter] = [ConsoleReporter()]
    for path, kind in ((settings.json, JsonReporter), (settings.junit, JUnitReporter)):
        if path:
            parent = Path(path).resolve().parent
            if not parent.is_dir():
                raise UsageError(f"cannot write the report {path!r}: {parent} does not exist")
            reporters.append(kind(path))
    return reporters


def _run(settings: CheckSettings) -> int:
    settings = settings.validate()
    reporters = _reporters(settings)
    try:
        summary = asyncio.run(run_check(settings, reporters))
    except OSError as error:
        raise UsageError(f"cannot write a report: {error.strerror or error}") from None
    return exit_status(summary)


@click.command("check")
@click.argument("url", required=False)
@click.option(
    "--secret",
    "secrets",
    multiple=True,
    envvar="HOOKPROOF_SECRET",
    help="Signing secret (repeatable: several are active during rotation). Env: HOOKPROOF_SECRET.",
)
@click.option(
    "--scheme",
    type=click.Choice(["standard", "stripe", "github"]),
    default=None,
    help="The signing scheme the partner's platform uses (default standard).",
)
@click.option(
    "--probe",
    default=None,
    metavar="URL_PREFIX",
    help="Probe prefix: GET {prefix}/{event_id} reports effects.",
)
@click.option(
    "--probe-token",
    default=None,
    envvar="HOOKPROOF_PROBE_TOKEN",
    help="Bearer token of the probe. Env: HOOKPROOF_PROBE_TOKEN.",
)
@click.option("--select", multiple=True, help="Scenario id, glob, family, tag or severity.")
@click.option("--deselect", multiple=True, help="Exclude an id, glob, family, tag or severity.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Seconds to wait for each answer (default 5).",
)
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
    type=click.FloatRange(min=0),
    default=None,
    metavar="S",
    help="Retry refused connections, timeouts and 503 for up to S seconds first.",
)
@click.option("--seed", type=int, default=None, help="Seed of the fuzzed cases (printed).")
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
@click.option("--json", "json_path", default=None, metavar="FILE", help="Write a JSON report.")
@click.option("--junit", "junit_path", default=None, metavar="FILE", help="Write JUnit XML.")
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
    select: tuple[str, ...],
    deselect: tuple[str, ...],
    timeout: float | None,
    concurrency: int | None,
    rate_limit: float | None,
    wait_for_endpoint: float | None,
    seed: int | None,
    tolerance: int | None,
    samples: int | None,
    config_path: str | None,
    event_template: str | None,
    json_path: str | None,
    junit_path: str | None,
    show_secrets: bool | None,
) -> int:
    """Check which delivery guarantees the webhook endpoint at URL keeps."""
    flags: dict[str, Any] = {
        "url": url,
        "secrets": secrets,
        "scheme": scheme,
        "probe": probe,
        "probe_token": probe_token,
        "select": select,
        "deselect": deselect,
        "timeout": timeout,
        "concurrency": concurrency,
        "rate_limit": rate_limit,
        "wait_for_endpoint": wait_for_endpoint,
        "seed": seed,
        "tolerance": tolerance,
        "samples": samples,
        "event_template": event_template,
        "json": json_path,
        "junit": junit_path,
        "show_secrets": show_secrets or None,
    }
    settings = CheckSettings().merged(load_config(config_path)).merged(flags)
    return _run(settings)


@click.command("scenarios")
@click.option("--json", "as_json", is_flag=True, help="Print the catalogue as JSON.")
@click.option("--markdown", is_flag=True, help="Print docs/scenarios.md.")
@click.option("--select", multiple=True, help="Scenario id, glob, family, tag or severity.")
def scenarios_command(as_json: bool, markdown: bool, select: Sequence[str]) -> int:
    """List the scenario catalogue."""
    if as_json and markdown:
        raise UsageError("choose one of --json and --markdown")
    chosen = CATALOGUE.select(tuple(select))
    if markdown:
        click.echo(catalogue_markdown(chosen), nl=False)
    elif as_json:
        click.echo(json.dumps(scenario_records(chosen), indent=2))
    else:
        width = max(len(s.id) for s in chosen) if chosen else 10
        click.echo(f"{'id':<{width}}  {'severity':<8}  {'tags':<5}  title")
        for scenario in chosen:
            tags = "".join(t.value for t in Harness if t in scenario.tags)
            click.echo(
                f"{scenario.id:<{width}}  {scenario.severity.value:<8}  {tags:<5}  {scenario.title}"
            )
        click.echo(f"\n{len(chosen)} scenarios")
    return 0


@click.command("demo")
@click.option("--select", multiple=True, help="Scenario id, glob, family, tag or severity.")
@click.option("--json", "json_path", default=None, metavar="FILE", help="Write a JSON report.")
@click.option("--junit", "junit_path", default=None, metavar="FILE", help="Write JUnit XML.")
@click.option("--seed", type=int, default=None, help="Seed of the fuzzed cases.")
def demo_command(
    select: tuple[str, ...], json_path: str | None, junit_path: str | None, seed: int | None
) -> int:
    """Start the reference receiver on a free local port and check it with every scenario.

    The receiver-side scenarios run over HTTP against it (the reports cover that run); the
    sender-side scenarios then run on the simulator in process, so the whole catalogue runs."""
    from conformance.demo import demo_settings, serving_reference_receiver

    with (
        tempfile.TemporaryDirectory(prefix="hookproof-demo-") as workdir,
        serving_reference_receiver(Path(workdir)) as served,
    ):
        click.echo(f"reference receiver listening on {served.url} (SQLite inbox in {workdir})")
        settings = demo_settings(served).merged(
            {"select": select, "json": json_path, "junit": junit_path, "seed": seed}
        )
        receiver_side = _run(settings)
    # The rest of the catalogue is about the sender: run it on the simulator, in process.
    if not CATALOGUE.select(settings.select, settings.deselect, harness=Harness.S):
        return receiver_side
    click.echo()
    sender_side = asyncio.run(run_sender_side(settings, [ConsoleReporter()]))
    return max(receiver_side, exit_status(sender_side))
