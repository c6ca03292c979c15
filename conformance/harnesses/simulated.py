"""The S harness: the sender simulator against the scripted in-process receiver.

Every step runs through :data:`~conformance.harnesses.sender_steps.SENDER_ACTIONS` (plus
``script``, which only makes sense here) and every sender-side expectation through
:data:`~conformance.sender_checks.SENDER_CHECKS`. The wire clock is the virtual clock: the
scripted receiver checks no tolerance, and fresh signatures become visible as fresh timestamps.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from conformance.exceptions import HarnessError
from conformance.harnesses.scripted_receiver import ScriptedReceiver
from conformance.harnesses.sender_steps import SENDER_ACTIONS, RecordingTransport, SenderDriver
from conformance.harnesses.signed_requests import WireScheme
from conformance.harnesses.state import EventOnWire, RateLimiter, WireOptions, WireRun
from conformance.model import Harness, Scenario, Side
from conformance.payloads import PayloadFactory
from conformance.results import Failure, Outcome, ScenarioResult
from receiver.signing import SCHEMES, Secret
from sender_sim.sender_client import sender_client

__all__ = ["SCRIPTED_URL", "S_ACTIONS", "SenderHarness"]

SCRIPTED_URL = "http://scripted.receiver.test/webhooks"
_SECRET = SCHEMES["standard"].mint_secret(b"hookproof-scripted-receiver").value
S_ACTIONS = frozenset({*SENDER_ACTIONS, "script"})
"""Every step action the S harness understands."""


class SenderHarness:
    """Runs sender-side scenarios: sender_sim, virtual time, a scripted receiver."""

    def __init__(self, *, seed: int = 0) -> None:
        self.seed = seed
        self.options = WireOptions(
            url=SCRIPTED_URL,
            scheme=WireScheme("standard", (Secret(_SECRET),)),
            seed=seed,
            nonce="s",
        )

    async def run(self, scenario: Scenario) -> ScenarioResult:
        from conformance.sender_checks import SENDER_CHECKS

        started = time.perf_counter()

        def result(
            outcome: Outcome, failures: Sequence[Failure] = (), message: str = ""
        ) -> ScenarioResult:
            return ScenarioResult(
                scenario,
                outcome,
                None,
                time.perf_counter() - started,
                tuple(failures),
                message,
                Harness.S.value,
            )

        receiver = ScriptedReceiver()
        failures: list[Failure] = []
        async with sender_client(transport=receiver.transport()) as scripted:
            run = WireRun(
                self.options,
                scripted,
                RateLimiter(None),
                _rng(self.seed, scenario),
                scenario.id,
            )
            transport = RecordingTransport(
                lambda request, _event_id: scripted.send(request), run.record, 3600.0
            )
            payloads = PayloadFactory()
            driver = SenderDriver(
                transport=transport,
                url=SCRIPTED_URL,
                scheme="standard",
                secrets=[_SECRET],
                make_body=lambda eid, ref, variant: payloads.body(
                    eid, variant=variant, reference=ref
                ),
                new_event_id=run.new_event_id,
                seed=self.seed,
                virtual_wire_clock=True,
            )
            try:
                driver.prepare(scenario.steps)
                receiver.advance = driver.simulator.advance
                for label, tracked in driver.events.items():
                    run.events[label] = EventOnWire(tracked.event_id, tracked.body)
                for step in scenario.steps:
                    if step.action == "script":
                        _script(receiver, driver, step.args)
                    else:
                        await SENDER_ACTIONS[step.action](driver, step.args)
                for expectation in scenario.expectations_of(Side.SENDER):
                    verdict = await SENDER_CHECKS[expectation.check](run, driver, expectation)
                    if verdict is not None:
                        failures.append(verdict)
            except HarnessError as error:
                return result(Outcome.ERROR, message=str(error))
            except Exception as error:  # a harness problem is an error outcome
                return result(Outcome.ERROR, message=f"{error.__class__.__name__}: {error}")
            finally:
                await driver.close()
        return result(Outcome.FAILED if failures else Outcome.PASSED, failures)


def _rng(seed: int, scenario: Scenario) -> Any:
    import random

    return random.Random(f"{seed}:{scenario.id}")


def _script(receiver: ScriptedReceiver, driver: SenderDriver, args: Mapping[str, Any]) -> None:
    tracked = driver.track(args["event"])
    receiver.script(tracked.event_id, list(args["answers"]))
