"""The receiver's clock, as its ``Date`` header tells it, against the runner's.

The clock scenarios sign timestamps a margin (``margin``, 10 s) inside and outside the
receiver's tolerance. Their verdicts hold only if the runner's clock and the receiver's agree to
well within that margin: a receiver whose clock runs 30 s ahead refuses a timestamp 295 s old (to
it, 325 s old), and would fail ``clock.past-inside`` while it verifies every real delivery
correctly. HTTP servers say their time in the ``Date`` header of every answer (RFC 9110 §6.6.1,
to the second), so the runner reads it from the endpoint's first answer:

* an offset within half the margin is noise (the header's one-second resolution, the network):
  nothing changes;
* an offset beyond it, but under half the tolerance, is **followed**: every timestamp the runner
  signs is shifted by it, so the edges are tested against the receiver's own clock, and the
  report says so. Real senders' fresh deliveries are unaffected by such an offset, so this hides
  nothing a sender would meet;
* an offset of half the tolerance or more is **not** followed (a sender's fresh deliveries are then
  close to being refused for real, which the scenarios must show), only reported: it explains the
  failures that follow.

:func:`local_now` is the runner's clock, read in one place (tests shift it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

__all__ = ["ClockOffset", "local_now", "offset_from_date"]


def local_now() -> float:
    """The runner's clock: seconds since the epoch."""
    return time.time()


def offset_from_date(date: str | None, received_at: float) -> float | None:
    """Seconds the receiver's clock is ahead of ours (negative: behind), from the ``Date`` of an
    answer that arrived at ``received_at`` (our clock); ``None`` without a usable header."""
    if not date:
        return None
    try:
        said = parsedate_to_datetime(date)
    except (TypeError, ValueError, IndexError):
        return None
    if said.tzinfo is None:  # not an HTTP date (they are GMT): no offset can be read from it
        return None
    return said.timestamp() + 0.5 - received_at  # the header is floored to the second


@dataclass(frozen=True)
class ClockOffset:
    """What the run makes of the receiver's clock: the offset it read and the one it follows."""

    seen: float | None = None
    """Seconds the receiver's ``Date`` is ahead of the runner's clock, when that is beyond half
    the margin (``None``: no header, or the clocks agree)."""
    followed: int = 0
    """Whole seconds added to every signed timestamp (0: the clocks agree, or too far apart)."""

    @classmethod
    def judge(cls, seen: float | None, *, margin: int, tolerance: int) -> ClockOffset:
        """Follow ``seen`` when it is beyond half the margin and under half the tolerance."""
        if seen is None or abs(seen) <= margin / 2:
            return cls()
        return cls(seen, round(seen) if abs(seen) < tolerance / 2 else 0)

    def describe(self) -> str | None:
        """One sentence for the report, or ``None`` when the clocks agree."""
        if self.seen is None:
            return None
        ahead = "ahead of" if self.seen > 0 else "behind"
        said = (
            f"the receiver's clock is {abs(self.seen):.0f} s {ahead} this machine's "
            "(its Date header)"
        )
        if self.followed:
            return f"{said}: signed timestamps follow it, so the tolerance is tested on its clock"
        return (
            f"{said}: not followed (half the tolerance or more), so a sender's fresh deliveries "
            "are close to its limit too"
        )
