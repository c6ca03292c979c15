"""The JUnit XML report: one ``testcase`` per scenario; a broken guarantee is a ``failure``, a
runner problem an ``error``, a scenario that does not apply a ``skipped``."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from conformance.events import Event, RunFinished, RunStarted
from conformance.reporters.text import describe_result
from conformance.results import Outcome

__all__ = ["JUnitReporter", "junit_document"]


def junit_document(
    target: str, finished: RunFinished, started: RunStarted | None = None
) -> ET.ElementTree[ET.Element]:
    """The JUnit XML of a finished run; ``started`` adds its scheme, seed and options as
    properties (``option.<name>``, JSON values)."""
    summary = finished.summary
    suite = ET.Element(
        "testsuite",
        name="hookproof",
        tests=str(len(finished.results)),
        failures=str(summary.failed),
        errors=str(summary.errors),
        skipped=str(summary.skipped),
        time=f"{finished.duration_s:.3f}",
    )
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="target", value=target)
    if started is not None:
        ET.SubElement(properties, "property", name="scheme", value=started.scheme)
        ET.SubElement(properties, "property", name="seed", value=str(started.seed))
        for key, value in started.options.items():
            ET.SubElement(properties, "property", name=f"option.{key}", value=json.dumps(value))
    if finished.interrupted:
        ET.SubElement(properties, "property", name="interrupted", value=finished.interrupted)
    for result in finished.results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"hookproof.{result.scenario.family}",
            name=result.scenario.id,
            time=f"{result.duration_s:.3f}",
        )
        if result.outcome is Outcome.FAILED:
            failure = ET.SubElement(
                case,
                "failure",
                message=result.scenario.guarantee,
                type=result.severity.value,
            )
            failure.text = describe_result(result)
        elif result.outcome is Outcome.ERROR:
            error = ET.SubElement(case, "error", message=result.message)
            error.text = describe_result(result)
        elif result.outcome is Outcome.SKIPPED:
            ET.SubElement(case, "skipped", message=result.message)
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.ElementTree(root)


class JUnitReporter:
    """Writes the JUnit XML report to ``path`` when the run finishes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._started: RunStarted | None = None

    def handle(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self._started = event
        elif isinstance(event, RunFinished):
            target = self._started.target if self._started else ""
            tree = junit_document(target, event, self._started)
            ET.indent(tree)
            tree.write(self.path, encoding="utf-8", xml_declaration=True)
