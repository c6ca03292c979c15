"""What the sender under test declares, and how much the judge allows around it.

``--policy`` names a built-in profile (``strict`` or ``schedule``: the simulator's own policies,
:data:`sender_sim.policy.POLICIES`) or a TOML policy file (:mod:`sender_sim.policy_file`, the same
file ``hookproof send --policy-file`` runs). The judge reads the policy through :class:`Declared`:
what each answer makes the sender do, the bounds of the delay after attempt *n*, and the slack.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from conformance.exceptions import UsageError
from sender_sim.classify import Outcome, Verdict
from sender_sim.policy import POLICIES, FixedSchedule, Policy
from sender_sim.policy_file import load_policy_file

__all__ = ["MIN_SLACK_S", "Declared", "resolve_policy"]

MIN_SLACK_S = 0.5
"""The default slack is ``max(MIN_SLACK_S, 10 %)`` of the declared delay."""


def resolve_policy(spec: str) -> Policy:
    """The built-in profile called ``spec``, or the TOML policy file at that path."""
    if spec in POLICIES:
        return POLICIES[spec]
    if not Path(spec).is_file():
        raise UsageError(
            f"--policy {spec!r} is neither a built-in profile ({', '.join(POLICIES)}) nor a file"
        )
    return load_policy_file(spec)


@dataclass(frozen=True)
class Declared:
    """The declared policy plus the judge's allowances (seconds)."""

    policy: Policy
    slack_s: float | None = None
    """An absolute slack (``--slack``); ``None`` means ``max(0.5 s, 10 %)``."""
    max_skew_s: float = 30.0
    quiet_period_s: float = 5.0
    trigger_start_s: float = 10.0
    """Allowed for the trigger to make the sender send (starting a process, calling an API)."""

    @property
    def timeout_s(self) -> float:
        return self.policy.timeout.total_seconds()

    @property
    def max_attempts(self) -> int:
        return self.policy.max_attempts

    @property
    def fixed(self) -> bool:
        return isinstance(self.policy.backoff, FixedSchedule)

    def slack(self, declared_s: float = 0.0) -> float:
        if self.slack_s is not None:
            return self.slack_s
        return max(MIN_SLACK_S, 0.1 * declared_s)

    def verdict(self, outcome: Outcome) -> Verdict:
        """What the declared classification does with ``outcome``."""
        return self.policy.profile.classify(outcome)

    def delay_bounds(self, made: int) -> tuple[float, float]:
        """The declared delay after attempt ``made`` (1-based) as ``(low, high)`` seconds: one
        value for a fixed schedule, ``[0, ceiling]`` for full jitter."""
        backoff = self.policy.backoff
        if isinstance(backoff, FixedSchedule):
            delay = backoff.delay_before(made + 1).total_seconds()
            return delay, delay
        return 0.0, backoff.ceiling(made).total_seconds()

    def describe_delay(self, made: int) -> str:
        high = self.delay_bounds(made)[1]
        if self.fixed:
            return f"{high:g} s"
        return f"full jitter in [0, {high:g}] s"

    @property
    def first_wait_s(self) -> float:
        """How long after the trigger runs the first attempt may take to arrive."""
        first = self.policy.backoff.first_delay().total_seconds()
        return self.trigger_start_s + first + self.slack(first)

    @property
    def hold_s(self) -> float:
        """How long a held answer is held: past the timeout plus slack, then answered 503."""
        return self.timeout_s + self.slack(self.timeout_s) + 1.0

    @property
    def retry_after_s(self) -> int:
        """The Retry-After hookproof announces: longer than the next scheduled delay plus slack,
        so honouring it can be told from following the schedule."""
        high = self.delay_bounds(1)[1]
        return max(2, math.ceil(high + self.slack(high)) + 1)
