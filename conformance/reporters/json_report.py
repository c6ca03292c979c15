"""The JSON report: one document in the shape CI tools read (see ``docs/conformance.md``)::

{"hookproof": VERSION, "target": URL, "scheme": S, "seed": N, "options": {...},
 "summary": {"passed", "failed", "skipped", "errors"},
 "scenarios": [{"id", "title", "family", "severity", "outcome", "observed_by",
                "duration_s", "failures": [{"expected", "observed", "reproduce",
                                            "severity", "cause"}],
                "reason"?}],
 "causes"?: [{"cause", "fix", "scenarios"}],
 "interrupted"?}

``seed`` and ``options`` are what the run was told (never a secret or the probe token), so that
``hookproof replay`` can run it again. A scenario's ``severity`` is the graded one: a failed
scenario whose failures are all ``should`` (a refusal code that differs from the convention, say)
is ``should`` even when the scenario is declared ``must``. ``reason`` says why a scenario was
skipped or errored (only there when there is one); ``causes`` groups the failures by likely cause
(only there when something failed); ``interrupted`` says why the run stopped early (only there
when it did).
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from conformance.causes import group_by_cause
from conformance.events import Event, RunFinished, RunStarted
from conformance.results import Failure, ScenarioResult

__all__ = [
    "JsonReporter",
    "failure_entry",
    "hookproof_version",
    "report_document",
    "result_entry",
]


def hookproof_version() -> str:
    try:
        return version("hookproof")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0+unknown"


def failure_entry(result: ScenarioResult, failure: Failure) -> dict[str, Any]:
    """One failure as the reports write it."""
    return {
        "expected": failure.expected,
        "observed": failure.observed,
        "reproduce": failure.reproduce,
        "severity": (failure.severity or result.scenario.severity).value,
        "cause": failure.cause,
    }


def result_entry(result: ScenarioResult) -> dict[str, Any]:
    """One scenario's verdict as the reports write it."""
    return {
        "id": result.scenario.id,
        "title": result.scenario.title,
        "family": result.scenario.family,
        "severity": result.severity.value,
        "outcome": result.outcome.value,
        "observed_by": result.observed_by,
        "duration_s": round(result.duration_s, 6),
        "failures": [failure_entry(result, f) for f in result.failures],
        **({"reason": result.message} if result.message else {}),
    }


def report_document(
    target: str, scheme: str, finished: RunFinished, started: RunStarted | None = None
) -> dict[str, Any]:
    """The JSON report of a finished run (``started`` gives its seed and options)."""
    document: dict[str, Any] = {
        "hookproof": hookproof_version(),
        "target": target,
        "scheme": scheme,
        "seed": started.seed if started is not None else None,
        "options": dict(started.options) if started is not None else {},
        "summary": finished.summary.as_dict(),
        "scenarios": [result_entry(r) for r in finished.results],
    }
    causes = group_by_cause(finished.results)
    if causes:
        document["causes"] = [
            {"cause": c.key, "fix": c.fix, "scenarios": list(c.scenarios)} for c in causes
        ]
    if finished.interrupted:
        document["interrupted"] = finished.interrupted
    return document


class JsonReporter:
    """Writes the JSON report to ``path`` when the run finishes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._started: RunStarted | None = None

    def handle(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self._started = event
        elif isinstance(event, RunFinished):
            started = self._started
            target, scheme = (started.target, started.scheme) if started else ("", "")
            document = report_document(target, scheme, event, started)
            self.path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
