"""A state machine over the middleware: any interleaving of deliveries, handler answers, and copies
held in flight keeps the answer table's promises (one effect per event, stored answers repeated).
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from receiver.inbox.memory import MemoryInbox
from receiver.middleware import is_transient
from tests.receiver.test_middleware_kit import Recorder, build_app, effects_of, payload, post, run
from tests.receiver.test_middleware_kit import signed as sign

EVENTS = st.sampled_from(["evt_a", "evt_b", "evt_c"])
ANSWERS = st.sampled_from([200, 202, 410, 400, 500, 503, 429, 408, "raise"])


class MiddlewareMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.inbox = MemoryInbox()
        self.recorder = Recorder()
        self.app = build_app("starlette", self.inbox, self.recorder)
        self.stored: dict[str, int] = {}
        self.held: dict[str, int] = {}

    @rule(event_id=EVENTS, answer=ANSWERS)
    def deliver(self, event_id: str, answer: Any) -> None:
        body = payload(answer)
        calls_before = len(self.recorder.calls)
        response = run(post(self.app, body, sign(body, event_id)))
        called = len(self.recorder.calls) > calls_before
        if event_id in self.stored:
            assert response.status_code == self.stored[event_id]
            assert not called
        elif event_id in self.held:
            assert response.status_code == 503
            assert int(response.headers["retry-after"]) >= 1
            assert not called
        else:
            assert called
            if answer == "raise":
                assert response.status_code == 503
            else:
                assert response.status_code == answer
                if not is_transient(answer):
                    self.stored[event_id] = answer

    @precondition(lambda self: len(self.held) < 2)
    @rule(event_id=EVENTS)
    def hold_a_copy_in_flight(self, event_id: str) -> None:
        if event_id in self.stored or event_id in self.held:
            return
        claim = run(self.inbox.claim(event_id))
        self.held[event_id] = claim.token

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def release_a_held_copy(self, data: st.DataObject) -> None:
        event_id = data.draw(st.sampled_from(sorted(self.held)))
        assert run(self.inbox.release(event_id, self.held.pop(event_id)))

    @invariant()
    def one_effect_per_committed_event(self) -> None:
        effects = effects_of(self.inbox)
        assert sorted(effects) == sorted(self.stored)


TestMiddlewareMachine = MiddlewareMachine.TestCase
TestMiddlewareMachine.settings = settings(max_examples=30, stateful_step_count=25, deadline=None)
