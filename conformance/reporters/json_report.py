"""The JSON report: one document in the shape CI tools read (see ``docs/conformance.md``)::

{"hookproof": VERSION, "target": URL, "scheme": S,
 "summary": {"passed", "failed", "skipped", "errors"},
 "scenarios": [{"id", "title", "family", "severity", "outcome", "observed_by",
                "duration_s", "failures": [{"expected", "observed", "reproduce"}],
                "reason"?}],
 "interrupted"?}

``reason`` says why a scenario was skipped or errored (only there when there is one);
``interrupted`` says why the run stopped early (only there when it did).
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from conformance.events import Event, RunFinished, RunStarted

__all__ = ["JsonReporter", "hookproof_version", "report_document"]


def hookproof_version() -> str:
    try:
        return version("hookproof")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0+unknown"


def report_document(target: str, scheme: str, finished: RunFinished) -> dict[str, Any]:
    """The JSON report of a finished run."""
    document: dict[str, Any] = {
        "hookproof": hookproof_version(),
        "target": target,
        "scheme": scheme,
        "summary": finished.summary.as_dict(),
        "scenarios": [
            {
                "id": r.scenario.id,
                "title": r.scenario.title,
                "family": r.scenario.family,
                "severity": r.scenario.severity.value,
                "outcome": r.outcome.value,
                "observed_by": r.observed_by,
                "duration_s": round(r.duration_s, 6),
                "failures": [
                    {"expected": f.expected, "observed": f.observed, "reproduce": f.reproduce}
                    for f in r.failures
                ],
                **({"reason": r.message} if r.message else {}),
            }
            for r in finished.results
        ],
    }
    if finished.interrupted:
        document["interrupted"] = finished.interrupted
    return document


class JsonReporter:
    """Writes the JSON report to ``path`` when the run finishes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._target = ""
        self._scheme = ""

    def handle(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self._target, self._scheme = event.target, event.scheme
        elif isinstance(event, RunFinished):
            document = report_document(self._target, self._scheme, event)
            self.path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
