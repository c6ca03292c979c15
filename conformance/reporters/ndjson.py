"""The NDJSON stream: every engine event as one JSON object per line, written as it happens.

Each line has ``"event"`` (``run_started``, ``scenario_started``, ``scenario_errored``,
``scenario_finished``, ``run_interrupted``, ``run_finished``) and that event's fields; a scenario
is its id, a verdict is the JSON report's scenario entry. A consumer can follow a run live
(``tail -f``) or rebuild the report from the stream.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from conformance.events import (
    Event,
    RunFinished,
    RunInterrupted,
    RunStarted,
    ScenarioErrored,
    ScenarioFinished,
    ScenarioStarted,
)
from conformance.reporters.json_report import result_entry

__all__ = ["NdjsonReporter", "event_record"]


def event_record(event: Event) -> dict[str, Any]:
    """``event`` as one JSON-ready object."""
    if isinstance(event, RunStarted):
        return {
            "event": "run_started",
            "target": event.target,
            "scheme": event.scheme,
            "scenarios": [s.id for s in event.scenarios],
            "probe": event.probe,
            "seed": event.seed,
            "options": dict(event.options),
        }
    if isinstance(event, ScenarioStarted):
        return {
            "event": "scenario_started",
            "scenario": event.scenario.id,
            "index": event.index,
            "total": event.total,
        }
    if isinstance(event, ScenarioErrored):
        return {
            "event": "scenario_errored",
            "scenario": event.scenario.id,
            "index": event.index,
            "total": event.total,
            "reason": event.reason,
        }
    if isinstance(event, ScenarioFinished):
        return {
            "event": "scenario_finished",
            "index": event.index,
            "total": event.total,
            "result": result_entry(event.result),
        }
    if isinstance(event, RunInterrupted):
        return {
            "event": "run_interrupted",
            "reason": event.reason,
            "completed": event.completed,
            "total": event.total,
        }
    return {
        "event": "run_finished",
        "summary": event.summary.as_dict(),
        "duration_s": round(event.duration_s, 6),
        "interrupted": event.interrupted,
    }


class NdjsonReporter:
    """Appends one line per event to ``path`` (created or truncated when the run starts)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: IO[str] | None = None

    def handle(self, event: Event) -> None:
        if self._file is None:
            self._file = self.path.open("w", encoding="utf-8")
        self._file.write(json.dumps(event_record(event)) + "\n")
        self._file.flush()
        if isinstance(event, RunFinished):
            self._file.close()
            self._file = None
