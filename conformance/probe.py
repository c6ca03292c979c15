"""The probe contract, client side: ``GET {prefix}/{event_id}`` with a bearer token.

A receiver in any language may implement it so that the runner observes effects, not only status
codes: ``200 {"event_id", "status": "committed"|"in_flight", "effects": int, "deliveries": int}``
or ``404`` for an event it never recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

import httpx

from conformance.exceptions import HarnessError

__all__ = ["Probe", "ProbeSnapshot"]


@dataclass(frozen=True)
class ProbeSnapshot:
    """What the probe says about one event; ``status`` is ``None`` when it answered 404."""

    event_id: str
    status: str | None
    effects: int
    deliveries: int

    def describe(self) -> str:
        if self.status is None:
            return "probe: unknown event (404), 0 effects"
        return f"probe: {self.status}, {self.effects} effect(s), {self.deliveries} delivery(ies)"


@dataclass(frozen=True)
class Probe:
    """Reads the probe of one receiver through the run's HTTP client."""

    prefix: str
    token: str

    def url(self, event_id: str) -> str:
        return f"{self.prefix.rstrip('/')}/{quote(event_id, safe='')}"

    def curl(self, event_id: str, *, show_secrets: bool) -> str:
        token = self.token if show_secrets else "<redacted>"
        return f"curl -sS -H 'Authorization: Bearer {token}' '{self.url(event_id)}'"

    async def read(self, client: httpx.AsyncClient, event_id: str, wait_s: float) -> ProbeSnapshot:
        try:
            response = await client.get(
                self.url(event_id),
                headers={"authorization": f"Bearer {self.token}"},
                timeout=wait_s,
            )
        except httpx.HTTPError as error:
            raise HarnessError(f"the probe did not answer: {error.__class__.__name__}") from None
        if response.status_code == 404:
            return ProbeSnapshot(event_id, None, 0, 0)
        if response.status_code != 200:
            raise HarnessError(f"the probe answered {response.status_code}, expected 200 or 404")
        try:
            data = response.json()
            status, effects, deliveries = data["status"], data["effects"], data["deliveries"]
        except (ValueError, KeyError, TypeError):
            raise HarnessError("the probe's answer does not follow the probe contract") from None
        if status not in ("committed", "in_flight") or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in (effects, deliveries)
        ):
            raise HarnessError("the probe's answer does not follow the probe contract")
        return ProbeSnapshot(event_id, status, effects, deliveries)
