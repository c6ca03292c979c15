"""The catalogue's data model: a scenario is declared data — steps and expectations — never code.

A :class:`Scenario` names the guarantee it tests in one sentence, a severity, the harnesses it runs
under (S, R, C) and two tuples of plain records: :class:`Step` (an action name and its arguments,
interpreted by a harness) and :class:`Expectation` (a check name and its arguments, evaluated by
the check catalogue). Adding a scenario means adding data; a test proves that every action and
check a scenario names exists in each harness it is tagged for.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from receiver.signing import SCHEMES as _BY_NAME

__all__ = [
    "CASE_SENSITIVE_IDS",
    "CASE_SENSITIVE_SIGNATURES",
    "SCHEMES",
    "SEVERAL_SIGNATURES",
    "SIGNED_IDS",
    "TIMED",
    "UNSIGNED_HEADERS",
    "Expectation",
    "Harness",
    "Scenario",
    "Severity",
    "Side",
    "Step",
    "expect",
    "scheme_choices",
    "step",
]

SCHEMES: frozenset[str] = frozenset(_BY_NAME)
"""Every scheme's name (the registry's)."""
TIMED: frozenset[str] = frozenset(name for name, s in _BY_NAME.items() if s.uses_timestamp)
"""The schemes that sign a timestamp."""
SEVERAL_SIGNATURES: frozenset[str] = frozenset(
    name for name, s in _BY_NAME.items() if s.several_signatures
)
"""The schemes whose deliveries may carry several signatures."""
SIGNED_IDS: frozenset[str] = frozenset(
    name
    for name, s in _BY_NAME.items()
    if not s.id_in_body and getattr(s, "id_header", None) not in s.unsigned_headers
)
"""The schemes whose event id header is part of the signed content: without it a delivery cannot
be verified. (Stripe-style ids travel in the signed body, GitHub's delivery id is not signed: an
authentic delivery can lack them.)"""
UNSIGNED_HEADERS: frozenset[str] = frozenset(
    name for name, s in _BY_NAME.items() if s.unsigned_headers
)
"""The schemes with a webhook header the signature does not cover (GitHub's delivery id)."""


CASE_SENSITIVE_IDS: frozenset[str] = frozenset(
    name for name, s in _BY_NAME.items() if s.case_sensitive_ids
)
"""The schemes whose event ids differ when only their letter case does."""
CASE_SENSITIVE_SIGNATURES: frozenset[str] = frozenset(
    name for name, s in _BY_NAME.items() if s.case_sensitive_signatures
)
"""The schemes whose signatures are other bytes when a letter's case changes (base64)."""
DESCRIBED_SECRETS: frozenset[str] = frozenset(
    name for name, s in _BY_NAME.items() if s.describes_secret
)
"""The schemes whose sender may describe its secret in the signature header (Stripe's masked
``secret=`` item), which a library may compare with its own and describe back."""


def scheme_choices() -> str:
    """The schemes to choose from, for messages: ``standard, stripe or github``."""
    *most, last = _BY_NAME
    return f"{', '.join(most)} or {last}" if most else last


class Severity(enum.StrEnum):
    """``must``: breaking it loses or duplicates work; ``should``: a hardening recommendation."""

    MUST = "must"
    SHOULD = "should"


class Harness(enum.StrEnum):
    """Where a scenario runs: sender simulator (S), reference receiver (R), any URL (C), an
    external sender through ``hookproof check-sender`` (X)."""

    S = "S"
    R = "R"
    C = "C"
    X = "X"


class Side(enum.StrEnum):
    """Whose behaviour an expectation judges."""

    SENDER = "sender"
    RECEIVER = "receiver"


def _frozen(args: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(args))


@dataclass(frozen=True)
class Step:
    """One declarative step: ``action`` names an entry of a harness's action table."""

    action: str
    args: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        if not self.args:
            return self.action
        rendered = ", ".join(f"{key}={value!r}" for key, value in self.args.items())
        return f"{self.action}({rendered})"


@dataclass(frozen=True)
class Expectation:
    """One declarative expectation: ``check`` names an entry of the check catalogue."""

    check: str
    side: Side
    args: Mapping[str, Any] = field(default_factory=dict)
    says: str = ""
    """The expectation in plain words (what the report prints as *expected*)."""

    def describe(self) -> str:
        return self.says or self.check

    @property
    def severity(self) -> Severity | None:
        """The severity this expectation grades its own failures with (``severity=`` among its
        arguments: a ``should`` inside a ``must`` scenario), or ``None``: the scenario's."""
        graded = self.args.get("severity")
        return None if graded is None else Severity(graded)


def step(action: str, /, **args: Any) -> Step:
    """A :class:`Step` with read-only arguments."""
    return Step(action, _frozen(args))


def expect(check: str, says: str, /, *, side: Side = Side.RECEIVER, **args: Any) -> Expectation:
    """A receiver-side (default) or sender-side :class:`Expectation` with read-only arguments."""
    return Expectation(check, side, _frozen(args), says)


@dataclass(frozen=True)
class Scenario:
    """One scenario of the catalogue; ``id`` is stable once shipped."""

    id: str
    title: str
    guarantee: str
    severity: Severity
    tags: frozenset[Harness]
    steps: tuple[Step, ...]
    expectations: tuple[Expectation, ...]
    schemes: frozenset[str] = SCHEMES
    """The wire schemes it applies to (clock scenarios need a signed timestamp)."""
    needs_probe: bool = False
    """Whether it can only be judged by effects (skipped, saying so, without a probe)."""

    @property
    def family(self) -> str:
        return self.id.split(".", 1)[0]

    def expectations_of(self, side: Side) -> tuple[Expectation, ...]:
        return tuple(e for e in self.expectations if e.side is side)

    @property
    def early_steps(self) -> tuple[Step, ...]:
        """The steps sent before the first scenario of a run (marked ``early``: the first copy
        of an event whose later copy must come after the whole run)."""
        return tuple(step for step in self.steps if step.args.get("early"))

    @property
    def judges_effects(self) -> bool:
        """Whether some receiver expectation reads effects (so a probe changes how it is judged)."""
        return any(e.check in EFFECT_CHECKS for e in self.expectations_of(Side.RECEIVER))


EFFECT_CHECKS: frozenset[str] = frozenset({"effects", "deliveries", "committed"})
"""Checks that read the receiver's effects through the probe."""
