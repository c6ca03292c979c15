"""One request and what came back: the evidence every receiver-side check reads and every
failure quotes (status, latency, a trimmed and scrubbed body, the request as ``curl``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import quote

from conformance.harnesses.signed_requests import REDACTED, WireRequest
from receiver.redaction import SCRUBBED_LENGTH

__all__ = ["SAMPLE_CHARS", "Exchange", "scrub", "seconds_text", "spellings"]

SAMPLE_CHARS = 300


def spellings(value: str) -> set[str]:
    """The ways an answer may carry ``value`` (a base64 secret or signature holds ``/`` and
    ``+``): as is, JSON-escaped with ``\\/`` (PHP's ``json_encode`` writes every ``/`` so), and
    percent-encoded (in a URL or a form field)."""
    return {value, value.replace("/", "\\/"), quote(value, safe="")}


def scrub(text: str, sensitive: Iterable[str]) -> str:
    """``text`` with every sensitive string (secret, signature), in any of its
    :func:`spellings`, replaced by ``<redacted>``."""
    kept = {form for s in sensitive if len(s) >= SCRUBBED_LENGTH for form in spellings(s)}
    for value in sorted(kept, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text


def seconds_text(seconds: float) -> str:
    """A real-time gap for people: ``<1 ms``, ``12 ms``, ``1.0 s``, ``2.0 h``."""
    if seconds < 0.001:
        return "<1 ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 3600:
        return f"{seconds:.1f} s"
    return f"{seconds / 3600:.1f} h"


@dataclass(frozen=True)
class Exchange:
    """A request exactly as sent and the answer (or the lack of one: ``error`` then says what
    happened, as a whole phrase such as ``no answer within 5 s (timeout)``)."""

    request: WireRequest
    status: int | None
    latency_s: float
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""
    error: str = ""
    event_id: str = ""
    gap_s: float | None = None
    """Real seconds since the event's first copy was sent, for a duplicate (``None``: first)."""
    late: bool = False
    """Whether the answer did not complete within the exchange's deadline (``--timeout``)."""

    def gap_text(self) -> str:
        """`` (a duplicate, 2.0 s after the first copy)`` for a copy after the first, else
        ``""``."""
        if self.gap_s is None:
            return ""
        return f" (a duplicate, {seconds_text(self.gap_s)} after the first copy)"

    @property
    def answered(self) -> bool:
        return self.status is not None

    @property
    def redirected(self) -> bool:
        """Whether the answer is a redirect (3xx), which no webhook sender follows."""
        return self.status is not None and 300 <= self.status < 400

    def describe(self, sensitive: Iterable[str] = ()) -> str:
        if self.status is None:
            return (self.error or "no answer") + self.gap_text()
        sample = scrub(self.body, sensitive).strip().replace("\n", " ")
        if len(sample) > SAMPLE_CHARS:
            sample = sample[:SAMPLE_CHARS] + "…"
        retry = self.headers.get("retry-after")
        extra = f", Retry-After: {retry}" if retry is not None else ""
        location = self.headers.get("location")
        if location is not None and self.redirected:
            extra += f", Location: {scrub(location, sensitive)}"
        shown = f": {sample}" if sample else ""
        return f"{self.status} in {self.latency_s * 1000:.0f} ms{extra}{self.gap_text()}{shown}"
