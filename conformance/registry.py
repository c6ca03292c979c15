"""The one registry of scenarios: lookup by id and selection by id, family, tag or severity.

Selectors are matched case-sensitively against, in order: a scenario id (or an ``fnmatch``
pattern such as ``signature.*``), a family (``clock``), a harness tag (``S``/``R``/``C``) and a
severity (``must``/``should``). A selector that matches nothing in the catalogue is a usage error,
so a typo never silently selects nothing.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Iterator, Sequence

from conformance.exceptions import CatalogueError, UsageError
from conformance.model import Harness, Scenario

__all__ = ["Registry"]

_ID = re.compile(r"^[a-z]+\.[a-z0-9]+(-[a-z0-9]+)*$")


class Registry:
    """An ordered, validated collection of scenarios with unique, well-formed ids."""

    def __init__(self, scenarios: Iterable[Scenario]) -> None:
        self._scenarios = tuple(scenarios)
        seen: set[str] = set()
        for scenario in self._scenarios:
            if not _ID.match(scenario.id):
                raise CatalogueError(f"scenario id {scenario.id!r} is not 'family.slug'")
            if scenario.id in seen:
                raise CatalogueError(f"scenario id {scenario.id!r} is declared twice")
            if not scenario.tags:
                raise CatalogueError(f"scenario {scenario.id!r} has no harness tag")
            seen.add(scenario.id)
        self._by_id = {s.id: s for s in self._scenarios}

    def __iter__(self) -> Iterator[Scenario]:
        return iter(self._scenarios)

    def __len__(self) -> int:
        return len(self._scenarios)

    def ids(self) -> list[str]:
        return [s.id for s in self._scenarios]

    def get(self, scenario_id: str) -> Scenario:
        try:
            return self._by_id[scenario_id]
        except KeyError:
            raise UsageError(f"unknown scenario id {scenario_id!r}") from None

    def families(self) -> list[str]:
        return list(dict.fromkeys(s.family for s in self._scenarios))

    def tagged(self, harness: Harness) -> list[Scenario]:
        return [s for s in self._scenarios if harness in s.tags]

    def _matches(self, selector: str, scenario: Scenario) -> bool:
        return (
            fnmatch.fnmatchcase(scenario.id, selector)
            or scenario.family == selector
            or selector in {t.value for t in scenario.tags}
            or scenario.severity.value == selector
        )

    def _check(self, selectors: Sequence[str]) -> None:
        for selector in selectors:
            if not any(self._matches(selector, s) for s in self._scenarios):
                raise UsageError(
                    f"selector {selector!r} matches no scenario id, family, tag or severity "
                    "(see 'hookproof scenarios')"
                )

    def select(
        self,
        select: Sequence[str] = (),
        deselect: Sequence[str] = (),
        *,
        harness: Harness | None = None,
    ) -> list[Scenario]:
        """The scenarios matching any ``select`` (all if none) and no ``deselect``, in order."""
        self._check([*select, *deselect])
        chosen = []
        for scenario in self._scenarios:
            if harness is not None and harness not in scenario.tags:
                continue
            if select and not any(self._matches(sel, scenario) for sel in select):
                continue
            if any(self._matches(sel, scenario) for sel in deselect):
                continue
            chosen.append(scenario)
        return chosen
