"""Fault injection as data: named, seeded faults the simulator injects on purpose and records.

A :class:`FaultPlan` is an immutable list of :class:`Fault` values plus a seed. Each fault names its
kind and, optionally, which attempts, deliveries or workers it targets, a probability (drawn from
the plan's own seeded ``random.Random``), a firing limit, and a parameter (``skew`` for the clock
faults, ``copies`` for concurrent sends). A :class:`FaultInjector` holds the run-time state (the
random stream and firing counts); every time a fault fires the simulator writes a ledger note
``fault:<kind>`` on the delivery concerned, so a run can be explained and replayed.

The kinds are :class:`FaultKind`; what each does, in one line, is :data:`FAULT_EFFECTS` (the
dashboard and the sandbox's ``faults`` command show it).

Textual form (for command lines): ``kind`` or ``kind:key=value,…`` with keys ``p`` (probability),
``attempts`` (``1+3``), ``skew`` (signed seconds), ``copies``, ``limit``, ``delivery``, ``worker``.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sender_sim.exceptions import ConfigurationError

__all__ = ["FAULT_EFFECTS", "Fault", "FaultInjector", "FaultKind", "FaultPlan"]


class FaultKind(enum.StrEnum):
    CRASH_AFTER_SEND = "crash_after_send"
    LOST_RESPONSE = "lost_response"
    LEASE_EXPIRY_IN_FLIGHT = "lease_expiry_in_flight"
    SECOND_WORKER = "second_worker"
    WORKER_CLOCK_SKEW = "worker_clock_skew"
    SIGNATURE_CLOCK_SKEW = "signature_clock_skew"
    TAMPERED_BODY = "tampered_body"
    WRONG_SECRET = "wrong_secret"
    ROTATED_SECRET = "rotated_secret"
    DUPLICATE_SEND = "duplicate_send"
    CONCURRENT_SENDS = "concurrent_sends"
    DOUBLE_REDRIVE = "double_redrive"


FAULT_EFFECTS: Mapping[FaultKind, str] = {
    FaultKind.CRASH_AFTER_SEND: "the worker sends, then dies: no persist, no ack; the lease "
    "expires and another worker resends (same event id)",
    FaultKind.LOST_RESPONSE: "the receiver answers but the worker never sees it (an ambiguous "
    "timeout, retried)",
    FaultKind.LEASE_EXPIRY_IN_FLIGHT: "the lease runs out mid-request; a rescuer worker takes "
    "over and resends; the first worker's late ack is refused",
    FaultKind.SECOND_WORKER: "a rival worker claims the same delivery at the same moment; "
    "exactly one wins",
    FaultKind.WORKER_CLOCK_SKEW: "the worker decides with a clock off by skew seconds",
    FaultKind.SIGNATURE_CLOCK_SKEW: "the signature timestamp is off by skew seconds "
    "(skew=-400 against a 300 s tolerance is refused)",
    FaultKind.TAMPERED_BODY: "one byte of the body changes after signing",
    FaultKind.WRONG_SECRET: "signed with a secret the receiver does not know",
    FaultKind.ROTATED_SECRET: "two signatures: a new (unknown) secret first, then the current one",
    FaultKind.DUPLICATE_SEND: "the same signed request twice in a row",
    FaultKind.CONCURRENT_SENDS: "copies identical requests at once (copies=2 by default)",
    FaultKind.DOUBLE_REDRIVE: "every redrive is submitted twice; the second must be refused",
}
"""What each fault does, in one line (every kind has one)."""


@dataclass(frozen=True)
class Fault:
    """One fault and whom it targets (empty sets target everyone)."""

    kind: FaultKind
    probability: float = 1.0
    attempts: frozenset[int] = frozenset()
    delivery_ids: frozenset[str] = frozenset()
    workers: frozenset[str] = frozenset()
    skew: timedelta = timedelta(0)
    copies: int = 2
    limit: int | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.probability <= 1.0:
            raise ConfigurationError("a fault probability must be between 0 and 1")
        if self.copies < 2:
            raise ConfigurationError("concurrent sends need at least 2 copies")
        if self.limit is not None and self.limit < 1:
            raise ConfigurationError("a fault limit must be at least 1")

    def targets(self, *, delivery_id: str, attempt: int, worker: str) -> bool:
        return (
            (not self.attempts or attempt in self.attempts)
            and (not self.delivery_ids or delivery_id in self.delivery_ids)
            and (not self.workers or worker in self.workers)
        )

    def describe(self) -> dict[str, Any]:
        """The fault as plain data (for ledger notes and reports)."""
        out: dict[str, Any] = {"kind": self.kind.value}
        if self.probability != 1.0:
            out["probability"] = self.probability
        if self.attempts:
            out["attempts"] = sorted(self.attempts)
        if self.skew:
            out["skew_s"] = self.skew.total_seconds()
        if self.kind is FaultKind.CONCURRENT_SENDS:
            out["copies"] = self.copies
        return out

    @classmethod
    def parse(cls, spec: str) -> Fault:
        """``kind`` or ``kind:key=value,…`` (see the module docstring)."""
        name, _, rest = spec.strip().partition(":")
        try:
            kind = FaultKind(name.strip())
        except ValueError:
            choices = ", ".join(k.value for k in FaultKind)
            raise ConfigurationError(f"unknown fault {name!r}; choose one of {choices}") from None
        options: dict[str, Any] = {}
        for item in filter(None, (p.strip() for p in rest.split(","))):
            key, eq, value = item.partition("=")
            if not eq:
                raise ConfigurationError(f"fault option {item!r} must be key=value")
            try:
                options.update(_option(key.strip(), value.strip()))
            except ValueError:
                raise ConfigurationError(f"bad value for fault option {item!r}") from None
        return cls(kind, **options)


def _option(key: str, value: str) -> Mapping[str, Any]:
    if key == "p":
        return {"probability": float(value)}
    if key == "attempts":
        return {"attempts": frozenset(int(v) for v in value.split("+"))}
    if key == "skew":
        return {"skew": timedelta(seconds=int(value))}
    if key == "copies":
        return {"copies": int(value)}
    if key == "limit":
        return {"limit": int(value)}
    if key == "delivery":
        return {"delivery_ids": frozenset(value.split("+"))}
    if key == "worker":
        return {"workers": frozenset(value.split("+"))}
    raise ConfigurationError(f"unknown fault option {key!r}")


@dataclass(frozen=True)
class FaultPlan:
    """The faults of one run and the seed of their random draws."""

    faults: tuple[Fault, ...] = ()
    seed: int = 0

    @classmethod
    def parse(cls, specs: Iterable[str], seed: int = 0) -> FaultPlan:
        return cls(tuple(Fault.parse(s) for s in specs), seed)

    def describe(self) -> list[dict[str, Any]]:
        return [f.describe() for f in self.faults]


@dataclass
class FaultInjector:
    """A plan's run-time state: its random stream and how often each fault fired."""

    plan: FaultPlan
    fired: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.plan.seed)

    def fires(
        self, kind: FaultKind, *, delivery_id: str, attempt: int, worker: str
    ) -> Fault | None:
        """The fault of ``kind`` that fires for this attempt, if any (counted when it does)."""
        for index, fault in enumerate(self.plan.faults):
            if fault.kind is not kind:
                continue
            if not fault.targets(delivery_id=delivery_id, attempt=attempt, worker=worker):
                continue
            if fault.limit is not None and self.fired.get(index, 0) >= fault.limit:
                continue
            if fault.probability < 1.0 and self._rng.random() >= fault.probability:
                continue
            self.fired[index] = self.fired.get(index, 0) + 1
            return fault
        return None

    def skew(self, kind: FaultKind, *, worker: str) -> timedelta:
        """A standing clock skew of ``kind`` for ``worker`` (not counted, not random)."""
        total = timedelta(0)
        for fault in self.plan.faults:
            if fault.kind is kind and (not fault.workers or worker in fault.workers):
                total += fault.skew
        return total

    def active(self, kind: FaultKind) -> bool:
        return any(f.kind is kind for f in self.plan.faults)
