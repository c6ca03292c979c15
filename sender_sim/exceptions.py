"""The sender simulator's one exception hierarchy.

Every failure the simulator reports is one of these; the root CLI catches :class:`SimulatorError`
and prints its message as one line::

    SimulatorError
    ├── ConfigurationError      a bad policy, endpoint, fault spec or option
    ├── InvalidTime             a naive datetime, or times that contradict each other
    ├── NotFound                an unknown delivery, event or endpoint id
    ├── ConflictError           an id reused for a different event or endpoint
    ├── StoreError              the SQLite store failed or holds a schema from the future
    ├── InvalidTransition       a transition asked of a delivery in the wrong state (a ValueError)
    ├── RedriveError            a redrive that was not carried out
    │   ├── RedriveIncomplete   actor, reason, fresh deadline or scope missing (nothing recorded)
    │   └── RedriveRefused      the decision was recorded as refused; ``problems`` says why per item
    ├── ResendRefused           a resend that queued nothing (``code``
    │                           WEBHOOK_DELIVERY_NOT_REPLAYABLE); ``ineligible``: id -> why
    ├── ExportTooLarge          an export over the row cap (``code`` EXPORT_TOO_LARGE)
    └── AnswerLate              no (whole) answer within an exchange's deadline (a TimeoutError;
                                :mod:`sender_sim.bounded_exchange`)

Messages never contain a secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "AnswerLate",
    "ConfigurationError",
    "ConflictError",
    "ExportTooLarge",
    "InvalidTime",
    "InvalidTransition",
    "NotFound",
    "RedriveError",
    "RedriveIncomplete",
    "RedriveProblem",
    "RedriveRefused",
    "ResendRefused",
    "SimulatorError",
    "StoreError",
    "lateness",
]


class SimulatorError(Exception):
    """Root of every error raised by the ``sender_sim`` package."""


class ConfigurationError(SimulatorError):
    """A policy, endpoint, fault specification or option is unusable."""


class InvalidTime(SimulatorError):
    """A datetime is naive (no timezone) or times contradict each other."""


class NotFound(SimulatorError):
    """No delivery, event or endpoint has the id given."""


class ConflictError(SimulatorError):
    """An id is already used for something different (e.g. an event id with another body)."""


class StoreError(SimulatorError):
    """The store failed, or its schema is newer than this code understands."""


class InvalidTransition(SimulatorError, ValueError):
    """A pure transition was asked of a delivery in a state it does not start from (a bug in
    the caller). Also a :class:`ValueError`, as it was before it had a name."""


class RedriveError(SimulatorError):
    """A redrive request that queued nothing."""


class RedriveIncomplete(RedriveError):
    """A redrive request lacks a required field (actor, reason, fresh deadline, scope)."""


@dataclass(frozen=True)
class RedriveProblem:
    """Why one delivery of a redrive scope was ineligible (``delivery_id`` ``""``: the scope)."""

    delivery_id: str
    code: str
    message: str


class RedriveRefused(RedriveError):
    """The redrive decision was recorded as refused; nothing was queued (bulk is atomic)."""

    def __init__(self, decision_id: int, problems: tuple[RedriveProblem, ...]) -> None:
        self.decision_id = decision_id
        self.problems = problems
        shown = "; ".join(
            f"{p.delivery_id}: {p.message}" if p.delivery_id else p.message for p in problems[:5]
        )
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        super().__init__(f"redrive refused (decision {decision_id}): {shown}{more}")

    @property
    def codes(self) -> frozenset[str]:
        """The distinct problem codes, e.g. ``{"not_dead_letter"}``."""
        return frozenset(p.code for p in self.problems)


class ResendRefused(SimulatorError):
    """A resend request that queued nothing (bulk is atomic): at least one id is not replayable.

    ``code`` is the stable :data:`NOT_REPLAYABLE`; ``ineligible`` maps each offending id to a
    short reason (``pending``, ``in_flight``, ``endpoint_disabled``, ``not_found``, ...).
    """

    code = "WEBHOOK_DELIVERY_NOT_REPLAYABLE"

    def __init__(self, ineligible: Mapping[str, str]) -> None:
        self.ineligible = dict(ineligible)
        shown = ", ".join(f"{k}: {v}" for k, v in list(self.ineligible.items())[:5])
        more = f" (and {len(self.ineligible) - 5} more)" if len(self.ineligible) > 5 else ""
        super().__init__(f"{self.code}: nothing was queued; {shown}{more}")


class ExportTooLarge(SimulatorError):
    """An export whose filters select more rows than the cap; nothing was written."""

    code = "EXPORT_TOO_LARGE"

    def __init__(self, count: int, limit: int) -> None:
        self.count = count
        self.limit = limit
        super().__init__(
            f"{self.code}: the filters select {count} rows, more than the {limit} an export may "
            "hold; narrow the filters (nothing was written)"
        )


class AnswerLate(SimulatorError, TimeoutError):
    """No answer, or no whole (bounded) answer, within the exchange's deadline.

    ``status`` is the answer's status when its head arrived; ``sent`` is ``False`` only when the
    transport reported its progress and the request's head never started to leave (it was still
    connecting, or waiting for a pooled connection); ``None`` when nothing is known.
    """

    def __init__(self, within_s: float, status: int | None, sent: bool | None) -> None:
        self.within_s = within_s
        self.status = status
        self.sent = sent
        super().__init__(self.describe())

    def describe(self) -> str:
        return lateness(self.within_s, self.status)


def lateness(within_s: float, status: int | None) -> str:
    """How late an answer was: none at all, or a head (``status``) whose body did not finish."""
    if status is None:
        return f"no answer within {within_s:g} s (timeout)"
    return f"answered {status} but the body did not finish within {within_s:g} s (timeout)"
