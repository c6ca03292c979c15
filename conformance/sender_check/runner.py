"""One ``sender.*`` scenario to one verdict, and a whole run as the engine's events.

:class:`SenderHarness` opens the scenario's URL, runs the trigger (or, in manual mode, prints the
URL), waits while the sender keeps trying — a scenario ends when ``quiet_period`` passes with no
new attempt (extended by the Retry-After hookproof announced and by the declared delay before a
retry the policy promises; after the last allowed attempt, lasting at least until one more attempt
would be due, so an extra one is seen), or at once when attempts exceed ``max_attempts`` — then
judges the history with :data:`~conformance.sender_check.judging.X_CHECKS`.

Scenarios wait in real time, so :func:`execute_concurrently` runs up to ``jobs`` at once, each on
its own URL, yielding the same events as :func:`conformance.engine.execute` (so the console, JSON,
JUnit and NDJSON reporters are those of ``hookproof check``); ``max_time`` bounds the whole run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from conformance.catalogue import CATALOGUE
from conformance.engine import ScenarioHarness
from conformance.events import (
    Event,
    RunFinished,
    RunInterrupted,
    RunStarted,
    ScenarioErrored,
    ScenarioFinished,
    ScenarioStarted,
)
from conformance.exceptions import UsageError
from conformance.model import Harness, Scenario, Side
from conformance.reporters import Reporter
from conformance.results import Failure, Outcome, ScenarioResult, Summary
from conformance.sender_check.declared import Declared, resolve_policy
from conformance.sender_check.judging import X_CHECKS, History, timeline
from conformance.sender_check.listener import Listener, Session
from conformance.sender_check.script import script_of
from conformance.sender_check.trigger import Trigger, check_trigger
from receiver.redaction import shown_url
from receiver.signing import Secret, Verifier, scheme_named
from sender_sim.classify import Action

_MAX_PORT = 65535

__all__ = ["SenderCheckSettings", "SenderHarness", "execute_concurrently", "run_sender_check"]

_ANY_TIMESTAMP = 10**10
"""The verifier's tolerance: freshness is judged by the checks, not by the signature."""


@dataclass(frozen=True)
class SenderCheckSettings:
    secrets: tuple[str, ...]
    trigger: str | None = None
    scheme: str = "standard"
    listen: str = "127.0.0.1:0"
    public_url: str | None = None
    policy: str = "strict"
    slack: float | None = None
    max_skew: float = 30.0
    quiet_period: float = 5.0
    trigger_start: float = 10.0
    max_time: float | None = None
    jobs: int = 4
    select: tuple[str, ...] = ()
    deselect: tuple[str, ...] = ()
    seed: int = 0

    def host_port(self) -> tuple[str, int]:
        host, sep, port = self.listen.rpartition(":")
        if not sep:
            host, port = self.listen, "0"
        try:
            number = int(port)
        except ValueError:
            raise UsageError(f"--listen {self.listen!r} is not HOST:PORT") from None
        if not 0 <= number <= _MAX_PORT:  # the socket layer would wrap 99999 to 34463
            raise UsageError(f"--listen {self.listen!r}: port {number} does not exist (0-65535)")
        return host.strip("[]") or "127.0.0.1", number


class SenderHarness:
    """Runs one ``sender.*`` scenario against the sender behind ``trigger``."""

    def __init__(
        self,
        listener: Listener,
        declared: Declared,
        verifier: Verifier,
        *,
        secrets: Sequence[str],
        trigger: str | None,
        announce: Callable[[str], None],
    ) -> None:
        self.listener = listener
        self.declared = declared
        self.verifier = verifier
        self.secrets = tuple(secrets)
        self.trigger = trigger
        self.announce = announce

    def _not_applicable(self, scenario: Scenario) -> str:
        scheme = self.verifier.scheme
        if scheme.name not in scenario.schemes:
            return f"the {scheme.name} scheme signs no timestamp"
        checks = {e.check for e in scenario.expectations}
        if "retry_after" in checks:
            answer = script_of(scenario)[0]
            if not self.declared.verdict(answer.outcome()).honor_retry_after:
                return f"the declared policy does not honour Retry-After on {answer.status}"
        return ""

    async def run(self, scenario: Scenario) -> ScenarioResult:
        began = time.perf_counter()
        skip = self._not_applicable(scenario)
        if skip:
            return ScenarioResult(scenario, Outcome.SKIPPED, None, 0.0, (), skip, "X")
        session = Session(
            scenario.id,
            script_of(scenario),
            self.verifier,
            self.declared.hold_s,
            self.declared.retry_after_s,
        )
        url = self.listener.open(session)
        trigger = None
        try:
            if self.trigger is None:
                self.announce(f"{scenario.id}: make the sender emit one event to {url}")
            else:
                trigger = Trigger(
                    self.trigger,
                    {
                        "HOOKPROOF_TARGET_URL": url,
                        "HOOKPROOF_SCENARIO": scenario.id,
                        "HOOKPROOF_SECRET": " ".join(self.secrets),
                    },
                )
                await trigger.start()
            error = await self._wait(session, trigger, url)
        finally:
            if trigger is not None:
                await trigger.stop()
            self.listener.forget(session)
        duration = time.perf_counter() - began
        if error:
            return ScenarioResult(scenario, Outcome.ERROR, None, duration, (), error, "X")
        return self._judge(scenario, session, duration)

    async def _wait(self, session: Session, trigger: Trigger | None, url: str) -> str:
        """Wait until the sender stops; an error line when it never sent."""
        loop = asyncio.get_running_loop()
        declared = self.declared
        first_wait = declared.first_wait_s
        started = loop.time()
        exited: asyncio.Task[int] | None = (
            asyncio.create_task(trigger.wait()) if trigger is not None else None
        )
        try:
            while True:
                if len(session.attempts) > declared.max_attempts and not session.in_flight:
                    return ""
                if not session.attempts:
                    if exited is not None and exited.done():
                        code = exited.result()
                        if code != 0:
                            assert trigger is not None
                            said = trigger.last_line()
                            return f"the trigger exited with status {code} before any request" + (
                                f": {said}" if said else ""
                            )
                    until = None if trigger is None else started + first_wait
                else:
                    until = None if session.in_flight else self._quiet_until(session)
                if until is not None and loop.time() >= until:
                    if not session.attempts:
                        return (
                            f"no request arrived at {url} within {first_wait:.1f} s of "
                            "running the trigger"
                        )
                    return ""
                session.changed.clear()
                waiters: list[asyncio.Future[object]] = [
                    asyncio.ensure_future(session.changed.wait())
                ]
                if exited is not None and not exited.done() and not session.attempts:
                    waiters.append(exited)  # type: ignore[arg-type]
                timeout = None if until is None else max(0.0, until - loop.time())
                _, pending = await asyncio.wait(
                    waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
                for waiter in pending:
                    if waiter is not exited:
                        waiter.cancel()
        finally:
            if exited is not None and not exited.done():
                exited.cancel()
                with contextlib.suppress(BaseException):
                    await exited

    def _quiet_until(self, session: Session) -> float:
        """When the scenario ends if nothing new arrives after the last attempt ended."""
        last = session.attempts[-1]
        assert last.ended is not None
        declared = self.declared
        wait = declared.quiet_period_s + (last.retry_after_s or 0.0)
        verdict = declared.verdict(last.answer.outcome())
        if verdict.action is Action.RETRY:
            high = declared.delay_bounds(last.number)[1]
            due = high + declared.slack(high)
            if last.number < declared.max_attempts:
                wait += due  # the promised retry: silence counts from when it is due
            else:
                # An attempt beyond max_attempts would come on the schedule too: wait at least
                # until it is due, or a quiet period no longer than the delay races it.
                wait = max(wait, due + (last.retry_after_s or 0.0))
        return last.ended + wait

    def _judge(self, scenario: Scenario, session: Session, duration: float) -> ScenarioResult:
        history = History(
            tuple(session.attempts),
            self.declared,
            self.verifier.scheme.uses_timestamp,
            tuple(session.followed),
            self.verifier.scheme.delivery_headers,
        )
        requests = history.recorded()
        reproduce = timeline(requests)
        failures = []
        for expectation in scenario.expectations_of(Side.SENDER):
            problems = X_CHECKS[expectation.check](history)
            failures += [
                Failure(
                    expectation.describe(),
                    problem.observed,
                    reproduce,
                    expectation.severity,
                    evidence=tuple(
                        line
                        for line, request in enumerate(requests)
                        if any(request is shown for shown in problem.shows)
                    ),
                )
                for problem in problems
            ]
        outcome = Outcome.FAILED if failures else Outcome.PASSED
        count = len(session.attempts)
        message = f"{count} attempt{'' if count == 1 else 's'}"
        return ScenarioResult(scenario, outcome, None, duration, tuple(failures), message, "X")


async def execute_concurrently(
    scenarios: Sequence[Scenario],
    harness: ScenarioHarness,
    *,
    target: str,
    scheme: str,
    seed: int,
    jobs: int,
    max_time: float | None = None,
) -> AsyncIterator[Event]:
    """Run up to ``jobs`` scenarios at once and yield the run's events as they happen.

    The promises of :func:`conformance.engine.execute` hold: a raising harness is an ``error``
    verdict, every run ends with ``RunFinished``, and when ``max_time`` runs out the running
    scenarios error, the rest are not run, and the run ends as interrupted."""
    started = time.perf_counter()
    loop = asyncio.get_running_loop()
    deadline = None if max_time is None else loop.time() + max_time
    total = len(scenarios)
    yield RunStarted(target, scheme, tuple(scenarios), False, seed)
    events: asyncio.Queue[Event] = asyncio.Queue()
    results: dict[str, ScenarioResult] = {}
    running: dict[str, float] = {}
    gate = asyncio.Semaphore(jobs)

    async def one(index: int, scenario: Scenario) -> None:
        async with gate:
            running[scenario.id] = time.perf_counter()
            events.put_nowait(ScenarioStarted(scenario, index, total))
            try:
                result = await harness.run(scenario)
            except Exception as error:  # the promise: a raising harness is an error
                reason = f"the harness raised {error.__class__.__name__}: {error}"
                events.put_nowait(ScenarioErrored(scenario, index, total, reason))
                result = _errored(scenario, reason, time.perf_counter() - running[scenario.id])
            del running[scenario.id]
            results[scenario.id] = result
            events.put_nowait(ScenarioFinished(result, len(results), total))

    tasks = [asyncio.create_task(one(i, s)) for i, s in enumerate(scenarios, start=1)]
    interrupted = ""
    try:
        while len(results) < total or not events.empty():
            timeout = None if deadline is None else max(0.0, deadline - loop.time())
            try:
                yield await asyncio.wait_for(events.get(), timeout)
            except TimeoutError:
                interrupted = f"the run's time budget (max_time {max_time:g} s) ran out"
                break
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    if interrupted:
        for scenario in scenarios:
            if scenario.id in running:
                spent = time.perf_counter() - running[scenario.id]
                result = _errored(scenario, interrupted, spent)
                results[scenario.id] = result
                yield ScenarioErrored(scenario, 0, total, interrupted)
                yield ScenarioFinished(result, len(results), total)
        yield RunInterrupted(interrupted, len(results), total)
    ordered = tuple(results[s.id] for s in scenarios if s.id in results)
    yield RunFinished(ordered, Summary.of(ordered), time.perf_counter() - started, interrupted)


def _errored(scenario: Scenario, reason: str, duration_s: float) -> ScenarioResult:
    return ScenarioResult(scenario, Outcome.ERROR, None, duration_s, (), reason, "X")


def plan(settings: SenderCheckSettings) -> list[Scenario]:
    """The selected ``sender.*`` scenarios (tag X)."""
    chosen = CATALOGUE.select(settings.select, settings.deselect, harness=Harness.X)
    if not chosen:
        raise UsageError("the selection contains no sender.* (X) scenario")
    return chosen


async def run_sender_check(
    settings: SenderCheckSettings,
    reporters: Sequence[Reporter],
    *,
    announce: Callable[[str], None] = print,
) -> Summary:
    """Validate ``settings``, run the selected scenarios, feed every event to ``reporters``."""
    if not settings.secrets:
        raise UsageError("at least one --secret (or HOOKPROOF_SECRET) is required")
    scenarios = plan(settings)
    scheme = scheme_named(settings.scheme)
    verifier = Verifier(
        [Secret(s) for s in settings.secrets], scheme=scheme, tolerance=_ANY_TIMESTAMP
    )
    declared = Declared(
        resolve_policy(settings.policy),
        slack_s=settings.slack,
        max_skew_s=settings.max_skew,
        quiet_period_s=settings.quiet_period,
        trigger_start_s=settings.trigger_start,
    )
    if settings.trigger is not None:
        check_trigger(settings.trigger)
    host, port = settings.host_port()
    listener = Listener(settings.public_url)
    try:
        await listener.start(host, port)
    except OSError as error:
        raise UsageError(f"cannot listen on {settings.listen}: {error.strerror or error}") from None
    harness = SenderHarness(
        listener,
        declared,
        verifier,
        secrets=settings.secrets,
        trigger=settings.trigger,
        announce=announce,
    )
    target = shown_url(listener.base_url) + f"/s/{listener.run_id}"  # a tunnel's password: unsaid
    jobs = settings.jobs if settings.trigger else 1
    summary = Summary()
    try:
        async for event in execute_concurrently(
            scenarios,
            harness,
            target=target,
            scheme=settings.scheme,
            seed=settings.seed,
            jobs=jobs,
            max_time=settings.max_time,
        ):
            for reporter in reporters:
                reporter.handle(event)
            if isinstance(event, RunFinished):
                summary = event.summary
    finally:
        await listener.close()
    return summary
