"""Helpers shared by the conformance tests: a secret, settings for an in-process app, and a
function that runs the catalogue against an ASGI app and returns each scenario's outcome."""

from __future__ import annotations

import asyncio
import base64
import re
from typing import Any

from conformance.asgi import app_client
from conformance.config import CheckSettings
from conformance.events import Event, RunFinished
from conformance.model import Harness
from conformance.results import Failure, Outcome, ScenarioResult
from conformance.session import run_check

SECRET = "whsec_" + base64.b64encode(b"hookproof-conformance-tests!").decode()
BASE = "http://hookproof.test"


class Collector:
    """A reporter that keeps the results."""

    def __init__(self) -> None:
        self.results: list[ScenarioResult] = []
        self.events: list[Event] = []

    def handle(self, event: Event) -> None:
        self.events.append(event)
        if isinstance(event, RunFinished):
            self.results = list(event.results)


def app_settings(probe_token: str | None, **overrides: Any) -> CheckSettings:
    probe = (
        {"probe": f"{BASE}/_hookproof/events", "probe_token": probe_token} if probe_token else {}
    )
    base = CheckSettings(
        url=f"{BASE}/webhooks",
        secrets=(SECRET,),
        samples=3,
        seed=7,
        concurrency=4,
        patience=0,
        **probe,
    )
    return base.merged(overrides)


def run_in_process(app: Any, settings: CheckSettings) -> dict[str, ScenarioResult]:
    """Run the R-tagged scenarios ``settings`` select against ``app``; results by id."""
    collector = Collector()

    async def go() -> None:
        async with app_client(app, BASE) as client:
            await run_check(settings, [collector], client=client, harness=Harness.R)

    asyncio.run(go())
    return {r.scenario.id: r for r in collector.results}


_EXACT_REFUSAL = re.compile(r"\(allowed: 4\d\d\)$")
_ANSWERED_4XX = re.compile(r"^(\d+ of \d+ answers: )?4\d\d ")


def refusal_code_only(failure: Failure) -> bool:
    """Whether ``failure`` is only a refusal-code convention: one exact 4xx expected, another
    4xx answered (Stripe's and Svix's samples answer 400 where hookproof's table says 401)."""
    return bool(_EXACT_REFUSAL.search(failure.expected) and _ANSWERED_4XX.match(failure.observed))


def broken_guarantees(results: dict[str, ScenarioResult]) -> dict[str, object]:
    """The scenarios that failed or errored for a reason other than a refusal-code convention
    (skips are not counted: a scenario that does not apply to a scheme is skipped)."""
    return {
        sid: (r.outcome.value, r.message, [(f.expected, f.observed) for f in r.failures])
        for sid, r in results.items()
        if r.outcome not in (Outcome.PASSED, Outcome.SKIPPED)
        and not (r.outcome is Outcome.FAILED and all(refusal_code_only(f) for f in r.failures))
    }
