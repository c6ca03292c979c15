"""Reporters: each consumes the engine's events and writes one format (console, JSON, JUnit,
NDJSON).

A reporter is anything with ``handle(event)``; none runs or judges a scenario.
"""

from __future__ import annotations

from typing import Protocol

from conformance.events import Event
from conformance.reporters.console import ConsoleReporter
from conformance.reporters.json_report import JsonReporter, report_document
from conformance.reporters.junit import JUnitReporter, junit_document
from conformance.reporters.ndjson import NdjsonReporter

__all__ = [
    "ConsoleReporter",
    "JUnitReporter",
    "JsonReporter",
    "NdjsonReporter",
    "Reporter",
    "junit_document",
    "report_document",
]


class Reporter(Protocol):
    def handle(self, event: Event) -> None: ...
