"""What a worker may use of the simulator: the narrow context of one delivery pass.

A :class:`~sender_sim.worker.Worker` needs the store, the simulation and wire clocks, the fault
injector, the policy with its seeded random stream, the HTTP client, and a signer's view of the
endpoints (their secrets, and a fresh unknown secret for the wrong- and rotated-secret faults).
:class:`WorkerContext` names exactly that, so the worker depends on this protocol and never on
:class:`~sender_sim.simulator.Simulator` (which satisfies it). Attributes are read on every use,
so a simulator whose store, faults or client are replaced is seen as it is now.
"""

from __future__ import annotations

import random
from typing import Protocol

import httpx

from receiver.signing import Secret
from sender_sim.clock import Clock
from sender_sim.endpoint_config import EndpointConfig
from sender_sim.faults import FaultInjector
from sender_sim.policy import Policy
from sender_sim.records import Event
from sender_sim.store import SQLiteStore
from sender_sim.wire import WireStamps

__all__ = ["WorkerContext"]


class WorkerContext(Protocol):
    """The store, clocks, faults, policy, client and signer a worker runs with."""

    @property
    def store(self) -> SQLiteStore: ...

    @property
    def clock(self) -> Clock:
        """The simulation clock: it decides scheduling."""
        ...

    @property
    def wire_clock(self) -> Clock:
        """The clock that stamps signatures."""
        ...

    @property
    def wire_stamps(self) -> WireStamps:
        """Keeps each delivery's signed seconds from repeating."""
        ...

    @property
    def faults(self) -> FaultInjector: ...

    @property
    def policy(self) -> Policy: ...

    @property
    def rng(self) -> random.Random:
        """The seeded stream for backoff jitter."""
        ...

    @property
    def client(self) -> httpx.AsyncClient: ...

    def endpoint_config(self, endpoint_id: str) -> EndpointConfig:
        """The endpoint with its secrets (``NotFound`` when it is not configured)."""
        ...

    def event(self, event_id: str) -> Event: ...

    def random_secret(self, scheme: str = "standard") -> Secret:
        """A fresh secret of ``scheme``'s shape that no receiver knows."""
        ...
