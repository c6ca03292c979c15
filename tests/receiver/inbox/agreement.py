"""One hypothesis state machine that drives several inbox backends and asserts they agree.

The same rules run against every backend of :func:`make_agreement_machine`'s list with one shared
fake clock (so lease expiry is exercised without waiting); after every step the claims' outcomes,
tokens, stored statuses and ``retry_after``, every record and the committed transactional effects
must be equal across backends. The first backend (the in-memory twin) is the reference.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from receiver.inbox import Claim, ClaimOutcome
from tests.receiver.inbox.backends import (
    Backend,
    FakeClock,
    OpenedBackend,
    WorkFailure,
    failing,
)

__all__ = ["EVENTS", "LEASE", "make_agreement_machine"]

LEASE = timedelta(seconds=30)
EVENTS = ("evt_a", "evt_b", "evt_c")
_LEASE_US = LEASE // timedelta(microseconds=1)

events = st.sampled_from(EVENTS)
steps = st.one_of(
    st.integers(0, 2 * _LEASE_US),
    st.sampled_from([_LEASE_US - 1, _LEASE_US, _LEASE_US + 1, 1, 1_000_000]),
)
token_choices = st.one_of(st.sampled_from(["current", "stale"]), st.integers(0, 4))
works = st.sampled_from(["none", "effect", "two_effects", "failing"])
statuses = st.sampled_from([200, 202, 204, 410])


def _outcome(result: Any) -> Any:
    """A comparable summary of one call's result or exception."""
    if isinstance(result, BaseException):
        return ("raised", type(result).__name__)
    return result


def _claim_key(claim: Claim) -> tuple[Any, ...]:
    return (claim.outcome.value, claim.token, claim.status, claim.retry_after, claim.taken_over)


def make_agreement_machine(backends: Sequence[Backend]) -> type[RuleBasedStateMachine]:
    """A machine class over ``backends`` (at least two; the first is the reference)."""
    if len(backends) < 2:
        raise ValueError("agreement needs at least two backends")
    chosen = tuple(backends)

    class InboxAgreement(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.loop = asyncio.new_event_loop()
            self.clock = FakeClock()
            self.opened: list[OpenedBackend] = []
            self.tokens: dict[str, int] = {}
            self.tags = 0

        def run(self, coroutine: Awaitable[Any]) -> Any:
            async def wrapped() -> Any:
                return await coroutine

            return self.loop.run_until_complete(wrapped())

        def each(self, call: Callable[[OpenedBackend], Awaitable[Any]]) -> list[Any]:
            """Run ``call`` on every backend in turn; results or exceptions, in backend order."""
            results = []
            for opened in self.opened:
                try:
                    results.append(self.run(call(opened)))
                except Exception as error:
                    results.append(error)
            return results

        def agree(self, results: list[Any], what: str) -> Any:
            reference = _outcome(results[0])
            for backend, result in zip(chosen[1:], results[1:], strict=True):
                assert _outcome(result) == reference, (
                    f"{what}: {backend.name} gave {result!r}, {chosen[0].name} gave {results[0]!r}"
                )
            return results[0]

        @initialize()
        def open_backends(self) -> None:
            for backend in chosen:
                self.opened.append(self.run(backend.open(self.clock, LEASE)))

        def teardown(self) -> None:
            try:
                for opened in self.opened:
                    self.run(opened.cleanup())
            finally:
                self.loop.close()

        def token(self, event_id: str, choice: str | int) -> int:
            if choice == "current":
                return self.tokens.get(event_id, 1)
            if choice == "stale":
                return self.tokens.get(event_id, 1) - 1
            assert isinstance(choice, int)
            return choice

        def note_claim(self, claim: Claim) -> None:
            if claim.outcome is ClaimOutcome.CLAIMED:
                self.tokens[claim.event_id] = claim.token

        @rule(event_id=events)
        def claim(self, event_id: str) -> None:
            claim = self.agree(self.each(lambda o: o.inbox.claim(event_id)), f"claim({event_id})")
            if isinstance(claim, Claim):
                self.note_claim(claim)

        @rule(event_id=events, copies=st.integers(2, 6))
        def claim_concurrently(self, event_id: str, copies: int) -> None:
            async def burst(opened: OpenedBackend) -> list[tuple[Any, ...]]:
                claims = await asyncio.gather(
                    *(opened.inbox.claim(event_id) for _ in range(copies))
                )
                won = [c for c in claims if c.outcome is ClaimOutcome.CLAIMED]
                assert len(won) <= 1, f"{len(won)} concurrent claims of {event_id} won"
                for claim in won:
                    self.note_claim(claim)
                return sorted(_claim_key(c) for c in claims)

            self.agree(self.each(burst), f"{copies} concurrent claims of {event_id}")

        @rule(event_id=events, choice=token_choices, status=statuses, work=works)
        def commit(self, event_id: str, choice: str | int, status: int, work: str) -> None:
            token = self.token(event_id, choice)
            self.tags += 1
            tag = f"{event_id}#{self.tags}"

            def works_for(opened: OpenedBackend) -> list[Any]:
                if work == "effect":
                    return [opened.effect(tag)]
                if work == "two_effects":
                    return [opened.effect(tag), opened.effect(tag + "'")]
                if work == "failing":
                    return [opened.effect(tag + "-kept?"), failing(opened.effect(tag + "-lost"))]
                return []

            results = self.each(lambda o: o.inbox.commit(event_id, token, status, works_for(o)))
            result = self.agree(results, f"commit({event_id}, token={token}, work={work})")
            if work == "failing" and result is not False:
                assert isinstance(result, WorkFailure), result

        @rule(event_id=events, choice=token_choices)
        def release(self, event_id: str, choice: str | int) -> None:
            token = self.token(event_id, choice)
            self.agree(
                self.each(lambda o: o.inbox.release(event_id, token)),
                f"release({event_id}, token={token})",
            )

        @rule(microseconds=steps)
        def advance(self, microseconds: int) -> None:
            self.clock.advance(timedelta(microseconds=microseconds))

        @rule(age=steps)
        def purge(self, age: int) -> None:
            cutoff = self.clock() - timedelta(microseconds=age)
            self.agree(self.each(lambda o: o.inbox.purge(cutoff)), f"purge(before {cutoff})")

        @invariant()
        def records_agree(self) -> None:
            if not self.opened:
                return
            for event_id in EVENTS:
                self.agree(
                    self.each(lambda o, e=event_id: o.inbox.lookup(e)),  # type: ignore[misc]
                    f"lookup({event_id})",
                )

        @invariant()
        def effects_agree(self) -> None:
            if not self.opened:
                return
            self.agree(self.each(lambda o: o.effects()), "committed effects")

    InboxAgreement.__name__ = "InboxAgreement_" + "_".join(b.name for b in chosen)
    return InboxAgreement
