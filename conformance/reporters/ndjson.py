"""The NDJSON report: one JSON object per line, written as the run happens (for log pipelines).

Lines: ``{"event": "run_started", "target", "scheme", "scenarios": [ids]}``, then one
``{"event": "scenario_finished", "id", "outcome", "duration_s", "failures", "reason"?}`` per
scenario as it finishes, then ``{"event": "run_finished", "summary", "duration_s",
"interrupted"?}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from conformance.events import Event, RunFinished, RunStarted, ScenarioFinished

__all__ = ["NdjsonReporter"]


class NdjsonReporter:
    """Appends one line per run milestone to ``path`` (flushed at each)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: IO[str] | None = None

    def _line(self, record: dict[str, Any]) -> None:
        if self._file is None:
            self._file = self.path.open("w", encoding="utf-8")
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def handle(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self._line(
                {
                    "event": "run_started",
                    "target": event.target,
                    "scheme": event.scheme,
                    "scenarios": [s.id for s in event.scenarios],
                }
            )
        elif isinstance(event, ScenarioFinished):
            r = event.result
            self._line(
                {
                    "event": "scenario_finished",
                    "id": r.scenario.id,
                    "outcome": r.outcome.value,
                    "duration_s": round(r.duration_s, 6),
                    "failures": [
                        {"expected": f.expected, "observed": f.observed, "reproduce": f.reproduce}
                        for f in r.failures
                    ],
                    **({"reason": r.message} if r.message else {}),
                }
            )
        elif isinstance(event, RunFinished):
            self._line(
                {
                    "event": "run_finished",
                    "summary": event.summary.as_dict(),
                    "duration_s": round(event.duration_s, 6),
                    **({"interrupted": event.interrupted} if event.interrupted else {}),
                }
            )
            if self._file is not None:
                self._file.close()
                self._file = None
