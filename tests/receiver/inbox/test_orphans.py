"""A claim made for a caller that was cancelled is released, whichever came first: the
cancellation (the backend hands the landed claim over) or the claim (the caller's ``claim``
finds it in its future)."""

from __future__ import annotations

import asyncio

import pytest

from receiver.exceptions import InboxUnavailable
from receiver.inbox import Claim, ClaimOutcome
from receiver.inbox.orphans import OrphanedClaims


class Releases:
    def __init__(self, *, fails: bool = False) -> None:
        self.calls: list[tuple[str, int]] = []
        self.fails = fails

    async def __call__(self, event_id: str, token: int) -> bool:
        self.calls.append((event_id, token))
        if self.fails:
            raise InboxUnavailable("the store is away")
        return True


pytestmark = pytest.mark.anyio

CLAIMED = Claim(ClaimOutcome.CLAIMED, "evt_a", token=3)


async def test_a_claim_made_before_the_cancellation_reached_its_caller_is_released() -> None:
    releases = Releases()
    orphans = OrphanedClaims(releases)
    future: asyncio.Future[Claim] = asyncio.get_running_loop().create_future()
    future.set_result(CLAIMED)
    orphans.cancelled(future)
    await orphans.drain()
    assert releases.calls == [("evt_a", 3)]
    assert orphans.released == 1


async def test_a_cancelled_future_waits_for_the_backend_to_hand_its_claim_over() -> None:
    releases = Releases()
    orphans = OrphanedClaims(releases)
    future: asyncio.Future[Claim] = asyncio.get_running_loop().create_future()
    future.cancel()
    orphans.cancelled(future)  # nothing known yet: the backend calls landed() when it lands
    await orphans.drain()
    assert releases.calls == []
    orphans.landed(CLAIMED)
    await orphans.drain()
    assert releases.calls == [("evt_a", 3)]


@pytest.mark.parametrize(
    "claim",
    [
        Claim(ClaimOutcome.IN_FLIGHT, "evt_a", retry_after=5),
        Claim(ClaimOutcome.COMMITTED, "evt_a", status=200),
    ],
)
async def test_a_claim_that_holds_nothing_is_not_released(claim: Claim) -> None:
    releases = Releases()
    orphans = OrphanedClaims(releases)
    orphans.landed(claim)
    await orphans.drain()
    assert releases.calls == []


async def test_a_failed_release_is_dropped_for_the_lease_to_free_the_event() -> None:
    releases = Releases(fails=True)
    orphans = OrphanedClaims(releases)
    orphans.landed(CLAIMED)
    await orphans.drain()  # no exception escapes, nothing is left running
    assert releases.calls == [("evt_a", 3)]
    assert orphans.released == 0
