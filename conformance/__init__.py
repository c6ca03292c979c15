"""hookproof's conformance runner: the scenario catalogue, the engine and its reporters.

The public API (the CLI, the pytest plugin and the benchmarks use only this)::

    from conformance import CATALOGUE, CheckSettings, run_check, Harness, Outcome

    settings = CheckSettings(url="http://127.0.0.1:8000/webhooks", secrets=("whsec_...",),
                             probe="http://127.0.0.1:8000/_hookproof/events", probe_token="t")
    summary = asyncio.run(run_check(settings, [ConsoleReporter(), JsonReporter("r.json")]))
    # or, in process: async with app_client(app) as client:
    #                     await run_check(settings, reporters, client=client, harness=Harness.R)

``CATALOGUE`` is the one registry of :class:`Scenario` records (``hookproof scenarios``);
:func:`execute` is the engine, yielding :mod:`conformance.events` that reporters consume;
:class:`WireHarness` runs receiver-side scenarios (R, C), :class:`SenderHarness` sender-side ones
(S). Every error is a :class:`ConformanceError`. Depends on ``receiver`` and ``sender_sim``.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "CATALOGUE": "conformance.catalogue",
    "CatalogueError": "conformance.exceptions",
    "CheckSettings": "conformance.config",
    "ConfigError": "conformance.exceptions",
    "ConformanceError": "conformance.exceptions",
    "ConsoleReporter": "conformance.reporters",
    "EndpointUnreachable": "conformance.exceptions",
    "Event": "conformance.events",
    "Expectation": "conformance.model",
    "Failure": "conformance.results",
    "Harness": "conformance.model",
    "HarnessError": "conformance.exceptions",
    "JUnitReporter": "conformance.reporters",
    "JsonReporter": "conformance.reporters",
    "Outcome": "conformance.results",
    "Registry": "conformance.registry",
    "RunFinished": "conformance.events",
    "RunInterrupted": "conformance.events",
    "RunStarted": "conformance.events",
    "Scenario": "conformance.model",
    "ScenarioErrored": "conformance.events",
    "ScenarioFinished": "conformance.events",
    "ScenarioResult": "conformance.results",
    "ScenarioStarted": "conformance.events",
    "SenderHarness": "conformance.harnesses.simulated",
    "Severity": "conformance.model",
    "Side": "conformance.model",
    "Step": "conformance.model",
    "Summary": "conformance.results",
    "UsageError": "conformance.exceptions",
    "WireHarness": "conformance.harnesses.http",
    "WireOptions": "conformance.harnesses.state",
    "app_client": "conformance.asgi",
    "execute": "conformance.engine",
    "import_app": "conformance.asgi",
    "load_config": "conformance.config",
    "run_check": "conformance.session",
}
"""Where each public name lives; imported on first use, so that importing a submodule (the
pytest plugin, loaded by every pytest run) stays cheap and side-effect free."""

__all__ = [
    "CATALOGUE",
    "CatalogueError",
    "CheckSettings",
    "ConfigError",
    "ConformanceError",
    "ConsoleReporter",
    "EndpointUnreachable",
    "Event",
    "Expectation",
    "Failure",
    "Harness",
    "HarnessError",
    "JUnitReporter",
    "JsonReporter",
    "Outcome",
    "Registry",
    "RunFinished",
    "RunInterrupted",
    "RunStarted",
    "Scenario",
    "ScenarioErrored",
    "ScenarioFinished",
    "ScenarioResult",
    "ScenarioStarted",
    "SenderHarness",
    "Severity",
    "Side",
    "Step",
    "Summary",
    "UsageError",
    "WireHarness",
    "WireOptions",
    "app_client",
    "execute",
    "import_app",
    "load_config",
    "run_check",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'conformance' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
