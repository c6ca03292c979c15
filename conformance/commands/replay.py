"""``hookproof replay REPORT.json``: run each scenario a report saw fail again, against the
report's target, and say which are FIXED and which are STILL FAILING.

The report gives the target, the scheme, the seed and the options (:mod:`conformance.reporters.
json_report`); secrets and the probe token never are in a report, so they come from the same flags,
environment variables and config file as ``hookproof check``. Every request is signed afresh.
Exit status: 0 when every replayed scenario now passes, 1 otherwise, 2 for a usage error (not a
report, no secret, an endpoint that never answers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

import click
from rich.text import Text

from conformance.answers import resolve_answers
from conformance.catalogue import CATALOGUE
from conformance.commands.options import header_option
from conformance.config import CheckSettings, load_config
from conformance.events import Event, RunFinished
from conformance.exceptions import UsageError
from conformance.interrupts import run_interruptibly
from conformance.reporters.text import counted, describe_result
from conformance.results import Outcome, ScenarioResult
from conformance.session import run_check
from receiver.commands.console import make_console
from receiver.commands.files import read_json
from receiver.commands.options import (
    max_time_option,
    probe_token_option,
    secret_option,
    timeout_option,
    verbose_option,
    warn_about_secrets,
)
from receiver.redaction import is_redacted, shown_url
from sender_sim.urls import url_problem

__all__ = ["ReplayPlan", "judge_replay", "plan_replay", "replay_command"]

_NOT_REPLAYED = {
    "url",
    "secrets",
    "probe_token",
    "headers",
    "json",
    "junit",
    "ndjson",
    "select",
    "deselect",
}
"""Settings a report's options never decide for the replay (a report names its headers but
keeps no value: they come from ``--header`` and the config, like the secrets)."""


@dataclass(frozen=True)
class ReplayPlan:
    """What to run again: the settings and the ids the report saw fail (known ones only)."""

    settings: CheckSettings
    ids: tuple[str, ...]
    unknown: tuple[str, ...] = ()


def read_report(path: str) -> dict[str, Any]:
    """The JSON report at ``path``; anything else is one :class:`UsageError`."""
    document = read_json(path, "the report", UsageError)
    shaped = isinstance(document, dict) and {"target", "scheme", "scenarios"} <= set(document)
    if not shaped or not isinstance(document["scenarios"], list):
        raise UsageError(f"{path!r} is not a 'hookproof check --json' report")
    target = document["target"]
    if url_problem(target) is not None:
        raise UsageError(f"the report's target {target!r} is not an endpoint URL")
    report: dict[str, Any] = document
    return report


def _report_options(options: Mapping[str, Any]) -> dict[str, Any]:
    known = {f.name for f in fields(CheckSettings)} - _NOT_REPLAYED
    values: dict[str, Any] = {}
    for key, value in options.items():
        if key not in known or value is None:
            continue
        if key == "answers":
            values[key] = resolve_answers(value, "the report's answers") if value else ()
        elif isinstance(value, list):
            values[key] = tuple(value)
        else:
            values[key] = value
    return values


def plan_replay(
    document: Mapping[str, Any], base: CheckSettings, overrides: Mapping[str, Any]
) -> ReplayPlan:
    """The replay of ``document``: ``base`` (defaults and config file), then the report's target,
    scheme, seed and options, then ``overrides`` (flags); only the failed (or errored) ids."""
    failed = [
        str(s["id"])
        for s in document["scenarios"]
        if isinstance(s, dict) and s.get("outcome") in (Outcome.FAILED, Outcome.ERROR)
    ]
    known = set(CATALOGUE.ids())
    ids = tuple(i for i in failed if i in known)
    from_report = _report_options(document.get("options") or {})
    if isinstance(document.get("seed"), int):
        from_report["seed"] = document["seed"]
    settings = (
        base.merged(from_report)
        .merged({"url": document["target"], "scheme": document["scheme"]})
        .merged(overrides)
    )
    if settings.url and is_redacted(settings.url):
        raise UsageError(
            "the report's target had a password or a token in its URL, which reports do not "
            f"keep ({settings.url}): pass the URL again with --url"
        )
    settings = _replace_selection(settings, ids)
    if settings.probe and not settings.probe_token:
        raise UsageError(
            "the report was run with a probe: pass --probe-token (or HOOKPROOF_PROBE_TOKEN)"
        )
    reported = (document.get("options") or {}).get("headers") or []
    given = {name.lower() for name, _ in settings.headers}
    missing = [str(name) for name in reported if str(name).lower() not in given]
    if missing:
        raise UsageError(
            f"the report was run with --header {', '.join(missing)}: pass it again (the report "
            "keeps no header value)"
        )
    return ReplayPlan(settings, ids, tuple(i for i in failed if i not in known))


def _replace_selection(settings: CheckSettings, ids: tuple[str, ...]) -> CheckSettings:
    return replace(settings, select=ids, deselect=(), json=None, junit=None, ndjson=None)


def judge_replay(result: ScenarioResult) -> str:
    """``FIXED`` when the scenario passes now, else ``STILL FAILING`` (or ``NOT CHECKED`` when
    it was skipped, saying why)."""
    if result.outcome is Outcome.PASSED:
        return "FIXED"
    if result.outcome is Outcome.SKIPPED:
        return "NOT CHECKED"
    return "STILL FAILING"


class _Collector:
    def __init__(self) -> None:
        self.results: tuple[ScenarioResult, ...] = ()

    def handle(self, event: Event) -> None:
        if isinstance(event, RunFinished):
            self.results = event.results


_STYLES = {"FIXED": "green", "STILL FAILING": "red", "NOT CHECKED": "yellow"}


@click.command("replay")
@click.argument("report", metavar="REPORT.json")
@secret_option()
@probe_token_option()
@header_option()
@timeout_option(default_text="the report's")
@max_time_option()
@click.option(
    "--config",
    "config_path",
    default=None,
    metavar="FILE",
    help="hookproof.toml or pyproject.toml, for the secrets, the probe token and the headers.",
)
@click.option(
    "--url",
    default=None,
    metavar="URL",
    help="The endpoint to replay against (default: the report's target; needed when that URL "
    "held a password or a token, which reports do not keep).",
)
@verbose_option(shows="every reproduction of what still fails")
def replay_command(
    report: str,
    secrets: tuple[str, ...],
    probe_token: str | None,
    headers: tuple[tuple[str, str], ...],
    timeout: float | None,
    max_time: float | None,
    config_path: str | None,
    url: str | None,
    verbose: bool | None,
) -> int:
    """Run the scenarios REPORT.json saw fail again; FIXED or STILL FAILING for each."""
    document = read_report(report)
    base = CheckSettings().merged(load_config(config_path))
    overrides = {
        "secrets": secrets,
        "probe_token": probe_token,
        "headers": headers,
        "timeout": timeout,
        "max_time": max_time,
        "url": url,
    }
    plan = plan_replay(document, base, overrides)
    console = make_console()
    for unknown in plan.unknown:
        console.print(Text.assemble(("NOT CHECKED", "yellow"), f"  {unknown} — no longer known"))
    if not plan.ids:
        if not plan.unknown:
            console.print("nothing to replay: the report has no failed scenario")
        return 1 if plan.unknown else 0
    settings = plan.settings.validate()  # a usage error says so before anything is announced
    console.print(
        f"hookproof: replaying {counted(len(plan.ids), 'failed scenario')} against "
        f"{shown_url(settings.url or '', show_secrets=settings.show_secrets)}"
    )
    collector = _Collector()
    warn_about_secrets(settings.scheme, settings.secrets)
    run_interruptibly(run_check(settings, [collector]))
    verdicts = [(result, judge_replay(result)) for result in collector.results]
    for result, verdict in verdicts:
        extra = f" — {result.message}" if result.message else ""
        console.print(
            Text.assemble((verdict.ljust(13), _STYLES[verdict]), f"  {result.scenario.id}{extra}")
        )
    still = [r for r, v in verdicts if v == "STILL FAILING"]
    for result in still:
        console.print()
        for line in describe_result(result, verbose=bool(verbose)).splitlines():
            console.print(line, soft_wrap=line.startswith("    ") or None)
    fixed = sum(v == "FIXED" for _, v in verdicts)
    console.print()
    console.print(f"{fixed} of {counted(len(verdicts), 'scenario')} fixed")
    all_fixed = not plan.unknown and fixed == len(verdicts) == len(plan.ids)
    return 0 if all_fixed else 1
