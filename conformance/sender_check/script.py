"""The scripted answers of a ``sender.*`` scenario: its steps, in order, the last one repeating.

``answer(status=…, retry_after="seconds"|"date", location=NAME)`` answers that status (with a
``Location`` naming another path of hookproof's own listener, ``{scenario URL}/NAME``, where a
request means the sender followed the redirect); ``hold`` keeps the
response open past the declared timeout (then answers 503 if the sender is still waiting);
``reset`` resets the connection before any answer. :meth:`Answer.outcome` says what the sender
observes, so the declared policy can classify it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from conformance.exceptions import CatalogueError
from conformance.model import Scenario
from sender_sim.classify import Outcome
from sender_sim.records import OutcomeKind

__all__ = ["ACTIONS", "Answer", "Kind", "script_of"]


class Kind(enum.StrEnum):
    STATUS = "answer"
    HOLD = "hold"
    RESET = "reset"


ACTIONS = frozenset(kind.value for kind in Kind)
"""The step actions a ``sender.*`` scenario may use."""


@dataclass(frozen=True)
class Answer:
    kind: Kind
    status: int = 0
    retry_after: str | None = None
    """``"seconds"`` or ``"date"``: announce a Retry-After in that form."""
    location: str | None = None
    """A redirect's target: ``Location`` is the scenario's URL plus ``/`` and this name."""

    def outcome(self) -> Outcome:
        """What the sender observes (a held answer is a timeout, a reset a network failure)."""
        if self.kind is Kind.HOLD:
            return Outcome.failure(OutcomeKind.TIMEOUT)
        if self.kind is Kind.RESET:
            return Outcome.failure(OutcomeKind.NETWORK)
        return Outcome.response(self.status, "1" if self.retry_after else None)

    def describe(self) -> str:
        if self.kind is Kind.HOLD:
            return "held past the timeout"
        if self.kind is Kind.RESET:
            return "connection reset"
        suffix = f" with Retry-After ({self.retry_after})" if self.retry_after else ""
        if self.location:
            suffix += " with a Location"
        return f"{self.status}{suffix}"


def script_of(scenario: Scenario) -> tuple[Answer, ...]:
    """The answers ``scenario`` scripts (a :class:`CatalogueError` for an unknown step)."""
    answers = []
    for st in scenario.steps:
        if st.action not in ACTIONS:
            raise CatalogueError(f"{scenario.id}: unknown sender step {st.action!r}")
        kind = Kind(st.action)
        answers.append(
            Answer(
                kind,
                int(st.args.get("status", 0)),
                st.args.get("retry_after"),
                st.args.get("location"),
            )
        )
    if not answers:
        raise CatalogueError(f"{scenario.id}: a sender scenario scripts at least one answer")
    return tuple(answers)
