"""The probe contract, client side: ``GET {prefix}/{event_id}`` with a bearer token.

A receiver in any language may implement it so that the runner observes effects, not only status
codes: ``200 {"event_id", "status": "committed"|"in_flight", "effects": int, "deliveries": int}``
or ``404`` for an event it never recorded.

The runner reads it through a client of its own (its own connection pool), so a receiver that
closes its connections after answering a webhook 500 is reported as a 500, not as a probe fault;
a read that finds a connection closed under it is tried once more (a GET is idempotent). Before the
first scenario, :meth:`Probe.preflight` reads it once: a wrong token or a probe that breaks the
contract is then one :class:`~conformance.exceptions.ProbeUnusable`, not an error per scenario.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from urllib.parse import quote

import httpx

from conformance.deadline import Answer, request_within
from conformance.exceptions import DeadlineExceeded, HarnessError, ProbeUnusable
from receiver.redaction import REDACTED, is_credential
from sender_sim.wire import tls_failure

__all__ = ["PROBE_MAX_BYTES", "Probe", "ProbeSnapshot"]

PROBE_MAX_BYTES = 64 * 1024
"""How much of a probe's answer is read: its JSON object is a few dozen bytes."""


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
    extra_headers: tuple[tuple[str, str], ...] = ()
    """The run's ``--header`` pairs, sent with every read too: a gateway in front of the
    endpoint usually stands in front of its probe (an API key, a tenant header). An
    ``Authorization`` among them is not: the probe's carries its bearer token."""

    @property
    def headers(self) -> dict[str, str]:
        """What every read sends: the extra headers, then the bearer token."""
        return dict(self._fields(self.token))

    def _fields(self, token: str) -> list[tuple[str, str]]:
        kept = [(n, v) for n, v in self.extra_headers if n.lower() != "authorization"]
        return [*kept, ("Authorization", f"Bearer {token}")]

    def url(self, event_id: str) -> str:
        return f"{self.prefix.rstrip('/')}/{quote(event_id, safe='')}"

    def curl(self, event_id: str, *, show_secrets: bool) -> str:
        options = []
        for name, value in self._fields(self.token if show_secrets else REDACTED):
            hidden = not show_secrets and is_credential(name) and name != "Authorization"
            options.append(f"-H {shlex.quote(f'{name}: ' + (REDACTED if hidden else value))}")
        return f"curl -sS {' '.join(options)} {shlex.quote(self.url(event_id))}"

    async def read(self, client: httpx.AsyncClient, event_id: str, wait_s: float) -> ProbeSnapshot:
        """What the probe says about ``event_id`` (a :class:`HarnessError` when it cannot say)."""
        return _snapshot(event_id, await self._get(client, event_id, wait_s))

    async def preflight(self, client: httpx.AsyncClient, wait_s: float) -> None:
        """Read the probe once for an event nobody sent, before the run: it must answer in time,
        take the token, and answer 404 or a JSON object. Anything else is one
        :class:`ProbeUnusable`. (A JSON object with the wrong fields errors each scenario that
        reads it, naming the probe contract.)"""
        where = f"the probe at {self.prefix}"
        try:
            response = await self._get(client, "evt_hookproof_probe_check", wait_s)
        except HarnessError as error:
            raise ProbeUnusable(f"{where}: {error}") from None
        status = response.status_code
        if status in (401, 403):
            raise ProbeUnusable(f"{where} refused the token ({status}): check --probe-token")
        if status not in (200, 404):
            raise ProbeUnusable(
                f"{where} answered {status} for an unknown event, expected 404 (is the URL the "
                "probe's prefix?)"
            )
        if status == 200:
            try:
                shaped = isinstance(response.json(), dict)
            except ValueError:
                shaped = False
            if not shaped:
                raise ProbeUnusable(f"{where} answered 200 without a JSON object (probe contract)")

    async def _get(self, client: httpx.AsyncClient, event_id: str, wait_s: float) -> Answer:
        headers = self.headers
        for last_try in (False, True):
            try:
                return await request_within(
                    client,
                    "GET",
                    self.url(event_id),
                    headers=headers,
                    within_s=wait_s,
                    max_bytes=PROBE_MAX_BYTES,
                )
            except DeadlineExceeded as late:
                raise HarnessError(f"the probe did not answer in time: {late.describe()}") from None
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                if last_try:
                    raise HarnessError(
                        "the probe did not answer: the connection closed under the read"
                    ) from None
            except httpx.HTTPError as error:
                said = tls_failure(error) or error.__class__.__name__
                raise HarnessError(f"the probe did not answer: {said}") from None
        raise AssertionError("unreachable")  # pragma: no cover


def _snapshot(event_id: str, response: Answer) -> ProbeSnapshot:
    """The probe's answer read by its contract (a :class:`HarnessError` when it breaks it)."""
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
