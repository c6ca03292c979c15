"""The scenario catalogue: every family's scenarios, in one registry (:data:`CATALOGUE`).

Each family lives in its own module as a tuple of declared :class:`~conformance.model.Scenario`
records; this module only gathers them, in the order the reports and the docs list them.
"""

from __future__ import annotations

from conformance.catalogue import (
    classification,
    clock,
    deadline,
    idempotency,
    leases,
    platform,
    redrive,
    response,
    schedules,
    sender,
    signature,
    size,
    story,
)
from conformance.registry import Registry

__all__ = ["CATALOGUE", "FAMILIES"]

FAMILIES = (
    signature,
    clock,
    idempotency,
    response,
    size,
    deadline,
    classification,
    leases,
    redrive,
    schedules,
    platform,
    story,
    sender,
)

CATALOGUE = Registry(scenario for family in FAMILIES for scenario in family.SCENARIOS)
"""Every scenario hookproof knows."""
