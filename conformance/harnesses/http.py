"""The HTTP harness (R and C): each step becomes the signed HTTP request a receiver would see.

The same interpreter serves both harnesses; only the ``httpx.AsyncClient`` differs (an
``ASGITransport`` for an app in process, real HTTP for a URL). Wire-level steps (``deliver`` and
its mutations, fuzzed headers, identical concurrent copies, latency samples) are looked up in
:data:`~conformance.harnesses.wire_steps.ACTIONS`; sender-level steps (``publish``, ``attempt``,
``redrive`` …) are performed by the sender simulator through a recording transport
(:mod:`conformance.harnesses.sender_steps`), so that six hours of backoff run on its virtual clock
while the signatures carry real time. Expectations are judged by
:data:`conformance.checks.RECEIVER_CHECKS` from the recorded exchanges and the probe.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence

import httpx

from conformance.exceptions import HarnessError
from conformance.harnesses.exchanges import seconds_text
from conformance.harnesses.sender_steps import SENDER_ACTIONS, RecordingTransport, SenderDriver
from conformance.harnesses.settling import EffectLag
from conformance.harnesses.state import EventOnWire, RateLimiter, WireOptions, WireRun
from conformance.harnesses.wire_steps import ACTIONS, REQUIRES
from conformance.judging import judge
from conformance.model import Harness, Scenario, Side, Step
from conformance.results import Failure, Outcome, ScenarioResult

__all__ = ["PACE_RUN", "WireHarness"]

PACE_RUN = "hookproof.pace"
"""The name of the lone delivery that learns, before the scenarios, whether effects lag answers
(its event id carries it)."""


def _sender_steps(scenario: Scenario) -> bool:
    return any(
        step.action in SENDER_ACTIONS and step.action not in ACTIONS for step in scenario.steps
    )


async def _perform(run: WireRun, step: Step) -> None:
    """Interpret one step: a wire action on ``run``, or a sender action on its simulator."""
    if step.action in ACTIONS:
        await ACTIONS[step.action](run, step.args)
        return
    if run.driver is None:
        raise HarnessError(f"step {step.action!r} needs the sender simulator")
    await SENDER_ACTIONS[step.action](run.driver, step.args)


async def _close_driver(run: WireRun) -> None:
    """Close the sender simulator ``run`` holds, if any (once)."""
    driver, run.driver = run.driver, None
    if driver is not None:
        await driver.close()


class WireHarness:
    """Runs receiver-side scenarios over one ``httpx.AsyncClient`` (R or C)."""

    def __init__(
        self,
        options: WireOptions,
        client: httpx.AsyncClient,
        harness: Harness,
        *,
        probe_client: httpx.AsyncClient | None = None,
        copies_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.options = options
        self.client = client
        self.probe_client = probe_client
        self.copies_client = copies_client
        self.harness = harness
        self.limiter = RateLimiter(options.rate_limit)
        self.effect_lag = EffectLag()
        self._early: dict[str, WireRun] = {}
        """Scenario states whose early steps were sent before the first scenario."""

    def skip_reason(self, scenario: Scenario) -> str | None:
        if self.options.scheme.name not in scenario.schemes:
            return f"does not apply to the {self.options.scheme.name} scheme"
        if scenario.needs_probe and self.options.probe is None:
            return "needs a probe (--probe, --probe-token) to observe effects"
        for step in scenario.steps:
            option, reason = REQUIRES.get(step.action, ("", ""))
            if option and getattr(self.options, option) is None:
                return reason
        return None

    def observed_by(self, scenario: Scenario) -> str | None:
        if not scenario.judges_effects and not scenario.needs_probe:
            return None
        return "probe" if self.options.probe is not None else "status"

    async def run(self, scenario: Scenario) -> ScenarioResult:
        started = time.perf_counter()
        observed_by = self.observed_by(scenario)

        def result(
            outcome: Outcome, failures: Sequence[Failure] = (), message: str = ""
        ) -> ScenarioResult:
            return ScenarioResult(
                scenario,
                outcome,
                observed_by,
                time.perf_counter() - started,
                tuple(failures),
                message,
                self.harness.value,
            )

        reason = self.skip_reason(scenario)
        if reason is not None:
            return result(Outcome.SKIPPED, message=reason)
        early = self._early.pop(scenario.id, None)
        run = early if early is not None else self._wire_run(scenario.id)
        failures: list[Failure] = []
        try:
            if run.driver is None and _sender_steps(scenario):  # else made by deliver_early
                self._driver(run, scenario)
            sent_early = scenario.early_steps if early is not None else ()
            for step in scenario.steps:
                if step not in sent_early:  # those went before the first scenario
                    await _perform(run, step)
            for expectation in scenario.expectations_of(Side.RECEIVER):
                verdict = await judge(run, scenario, expectation)  # graded (#9 §2)
                if isinstance(verdict, Failure):  # Unjudged: observed_by says how it was judged
                    failures.append(verdict)
        except HarnessError as error:
            return result(Outcome.ERROR, message=str(error))
        except Exception as error:  # a runner problem becomes an error outcome, never a crash
            return result(Outcome.ERROR, message=f"{error.__class__.__name__}: {error}")
        finally:
            await _close_driver(run)
        said = "; ".join(filter(None, [_duplicate_gaps(run), *run.remarks.values()]))
        return result(Outcome.FAILED if failures else Outcome.PASSED, failures, said)

    async def deliver_early(self, scenarios: Sequence[Scenario]) -> None:
        """Before the first scenario: the steps marked ``early`` of each of ``scenarios`` that
        will run (the first copy of the late duplicate, the first attempt of an event the sender
        will redrive), so that the run's time counts toward ``--patience``: the later copy then
        comes as long after the first as the run took to reach it (seconds against a real
        endpoint), and waits only what patience still asks. A scenario with sender steps keeps
        its simulator until its turn. A scenario whose early steps failed to send runs them
        again in its turn."""
        for scenario in scenarios:
            steps = scenario.early_steps
            if not steps or self.skip_reason(scenario) is not None:
                continue
            run = self._wire_run(scenario.id)
            try:
                if _sender_steps(scenario):
                    self._driver(run, scenario)
                for step in steps:
                    await _perform(run, step)
            except HarnessError:
                await _close_driver(run)
                continue
            self._early[scenario.id] = run

    async def aclose(self) -> None:
        """Let go of what early steps kept for scenarios that did not run (an interrupted run,
        a spent ``--max-time``): their sender simulators."""
        early, self._early = self._early, {}
        for run in early.values():
            await _close_driver(run)

    async def learn_effect_lag(self) -> None:
        """Before the first scenario (with a probe and ``--settle``): deliver one lone event and
        read the probe at its 2xx. Committed without its effect, it is read again until the
        effect shows: the receiver applies effects after answering, and the run learns how late
        (:mod:`conformance.harnesses.settling`). A refused or unanswered delivery teaches
        nothing; the scenarios then judge as they read."""
        if self.options.probe is None or self.options.settle <= 0:
            return
        # On a connection of its own: whatever the receiver does to it cannot reach the pool
        # the scenarios use (one that closes its connections after a 500, say).
        run = self._wire_run(PACE_RUN, client=self.copies_client)
        event = run.event("lone")
        try:
            exchange = await run.send("lone", run.signed(event), event.event_id)
            if exchange.status is not None and 200 <= exchange.status < 300:
                await run.read_probe(event.event_id, at_least=1)
        except HarnessError:
            return

    def _wire_run(self, scenario_id: str, *, client: httpx.AsyncClient | None = None) -> WireRun:
        """A fresh scenario state over this harness's clients (``client``: another for its
        webhooks), sharing the run's limiter and effect lag."""
        return WireRun(
            self.options,
            client or self.client,
            self.limiter,
            random.Random(f"{self.options.seed}:{scenario_id}"),
            scenario_id,
            probe_client=self.probe_client,
            copies_client=self.copies_client,
            effect_lag=self.effect_lag,
        )

    def _driver(self, run: WireRun, scenario: Scenario) -> SenderDriver:
        """A sender simulator whose requests go to this harness's endpoint."""
        options = self.options

        async def forward(request: httpx.Request, event_id: str) -> httpx.Response:
            await run.limiter.wait()
            return await run.http_for(event_id).send(request)

        transport = RecordingTransport(
            forward, run.record, options.timeout, headers=options.request_headers.pairs
        )
        driver = SenderDriver(
            transport=transport,
            url=options.url,
            scheme=options.scheme.name,
            secrets=[s.value for s in options.scheme.secrets],
            make_body=lambda eid, ref, variant: options.payloads.body(
                eid, variant=variant, reference=ref
            ),
            new_event_id=run.new_event_id,
            seed=options.seed,
            virtual_wire_clock=False,
            timeout_s=options.timeout,
            concurrency=options.concurrency,
            patience_s=options.patience,
        )
        driver.prepare(scenario.steps)
        for label, tracked in driver.events.items():
            run.events[label] = EventOnWire(tracked.event_id, tracked.body)
        run.driver = driver
        return driver


GAP_FAMILIES = frozenset({"idempotency"})
"""The families whose duplicates are the point: their results say the real gap of each."""


def _duplicate_gaps(run: WireRun) -> str:
    """The real time between each event's first copy and its duplicates, in words (``""`` when
    nothing was sent twice): "hours later" on a sender's clock is this on the wire."""
    if run.scenario_id.split(".", 1)[0] not in GAP_FAMILIES:
        return ""
    gaps = sorted(e.gap_s for group in run.exchanges.values() for e in group if e.gap_s is not None)
    if not gaps:
        return ""
    copies = "duplicate" if len(gaps) == 1 else "duplicates"
    low, high = seconds_text(gaps[0]), seconds_text(gaps[-1])
    span = low if low == high else f"{low} to {high}"
    return f"{len(gaps)} {copies} sent {span} after the first copy (real time)"
