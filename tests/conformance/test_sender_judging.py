"""The sender checks as pure functions over recorded attempts: held answers compensated, jitter
ceilings, timestamps judged by differences (a skewed clock passes, a reused timestamp fails), the
maximum skew, Retry-After, in-flight overlap, the slack's default; the event id and timestamp
read from the raw headers of attempts whose signature does not verify."""

from __future__ import annotations

import asyncio
import base64
import random
import time
from datetime import timedelta

import httpx
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from conformance.sender_check.declared import Declared
from conformance.sender_check.judging import (
    NO_BACKOFF_FRACTION,
    NO_BACKOFF_MIN_GAPS,
    X_CHECKS,
    History,
    timeline,
)
from conformance.sender_check.listener import Attempt, Listener, Session
from conformance.sender_check.runner import SenderHarness
from conformance.sender_check.script import Answer, Kind
from receiver.signing import Secret, VerifiedMessage, Verifier
from sender_sim.policy import FixedSchedule, FullJitter, Policy

S503 = Answer(Kind.STATUS, 503)
HOLD = Answer(Kind.HOLD)
TWO_S = FixedSchedule((timedelta(0), timedelta(seconds=2)))
FIXED = Declared(Policy(backoff=TWO_S, timeout=timedelta(seconds=1)))
JITTER = Declared(Policy(backoff=FullJitter(timedelta(seconds=1), timedelta(seconds=4))))
WALL = 1_800_000_000.0
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def _attempt(
    n: int, at: float, *, answer: Answer = S503, held: float = 0.0, ts: float | None = None,
    event_id: str = "evt_1",
) -> Attempt:  # fmt: skip
    stamp = int(WALL + at if ts is None else ts)
    message = VerifiedMessage(event_id, b"{}", "standard", stamp)
    attempt = Attempt(n, at, WALL + at, {}, b"{}", answer, message, event_id=event_id)
    attempt.timestamp = stamp
    attempt.ended = at + held
    attempt.hung_up = answer.kind is Kind.HOLD
    return attempt


def _check(name: str, declared: Declared, *attempts: Attempt) -> list[str]:
    return [problem.observed for problem in X_CHECKS[name](History(attempts, declared, True))]


def test_fixed_delays_within_slack_and_a_held_answer_compensated() -> None:
    assert _check("delays", FIXED, _attempt(1, 0), _attempt(2, 2.4)) == []
    assert _check("delays", FIXED, _attempt(1, 0), _attempt(2, 2.6))  # slack is 0.5 s
    assert _check("delays", FIXED, _attempt(1, 0), _attempt(2, 1.4)) == [
        "attempt 2 arrived 1.40 s after attempt 1; declared 2 s (allowed 1.50–2.50 s): too "
        "soon, or attempt 1 left more than 0.5 s after it was due"
    ]
    # held 1 s: a sender scheduling from the end of the attempt (3 s) is allowed too
    held = _attempt(1, 0, answer=HOLD, held=1.0)
    assert _check("delays", FIXED, held, _attempt(2, 3.0)) == []


def test_full_jitter_gaps_stay_under_their_ceiling_plus_slack() -> None:
    assert _check("delays", JITTER, _attempt(1, 0), _attempt(2, 1.4), _attempt(3, 3.9)) == []
    problems = _check("delays", JITTER, _attempt(1, 0), _attempt(2, 1.6))
    assert problems == [
        "attempt 2 arrived 1.60 s after attempt 1; declared full jitter in [0, 1] s "
        "(allowed 0.00–1.50 s)"
    ]


def _jittered(*waits: float, answer: Answer = S503) -> list[Attempt]:
    """Attempts answered at once (``answer``), each next one ``waits[i]`` s after the last."""
    attempts, at = [_attempt(1, 0.0, answer=answer)], 0.0
    for number, wait in enumerate(waits, start=2):
        at += wait
        attempts.append(_attempt(number, at, answer=answer))
    return attempts


NO_BACKOFF = "the gaps look like no backoff at all"


def test_full_jitter_waits_all_far_below_their_ceilings_look_like_no_backoff() -> None:
    """Each wait alone fits [0, ceiling]; all of three or more near 0 s is no backoff."""
    instant = _check("delays", JITTER, *_jittered(0.001, 0.002, 0.001))
    assert len(instant) == 1
    assert instant[0].startswith(NO_BACKOFF + ": after attempts 1, 2, 3 the sender waited ")
    assert "each below 3% of its full-jitter ceiling (1, 2, 4 s)" in instant[0]
    assert "probability 2.7e-05" in instant[0]
    assert _check("delays", JITTER, *_jittered(0.001, 0.002)) == []  # two gaps: too few
    assert _check("delays", JITTER, *_jittered(0.001, 0.07, 0.001)) == []  # 3.5 % of 2 s
    held = _jittered(0.001, 0.001, 0.001, answer=HOLD)
    assert _check("delays", JITTER, *held) == []  # a held attempt's wait is no evidence
    assert _check("delays", FIXED, *_jittered(0.001, 0.001, 0.001))  # fixed: judged as before


def _no_backoff_judged(ratios: list[float]) -> bool:
    """Whether the delays check calls waits of ``ratios`` × their ceilings no backoff."""
    ceilings = [JITTER.delay_bounds(made)[1] for made in range(1, len(ratios) + 1)]
    attempts = _jittered(*(r * c for r, c in zip(ratios, ceilings, strict=True)))
    return any(p.startswith(NO_BACKOFF) for p in _check("delays", JITTER, *attempts))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=7))
def test_no_backoff_exactly_when_every_one_of_three_or_more_waits_is_below_the_fraction(
    ratios: list[float],
) -> None:
    assume(all(abs(r - NO_BACKOFF_FRACTION) > 1e-9 for r in ratios))  # float rounding
    expected = len(ratios) >= NO_BACKOFF_MIN_GAPS and max(ratios) < NO_BACKOFF_FRACTION
    assert _no_backoff_judged(ratios) is expected


def test_a_correct_full_jitter_sender_is_almost_never_called_no_backoff() -> None:
    """A seeded simulation of correct full-jitter schedules (uniform waits below each ceiling,
    as ``FullJitter.next_at`` draws them): false alarms stay below 1e-4 of the scenarios."""
    assert NO_BACKOFF_FRACTION**NO_BACKOFF_MIN_GAPS * 3 < 1e-4  # three scenarios of 3 gaps
    rng = random.Random(20_260_601)
    runs = 100_000
    alarms = sum(_no_backoff_judged([rng.random() for _ in range(3)]) for _ in range(runs))
    assert alarms <= 1e-4 * runs, alarms


def test_timestamps_by_differences_and_within_the_maximum_skew() -> None:
    skewed = [_attempt(1, 0, ts=WALL - 20), _attempt(2, 3, ts=WALL - 17)]
    assert _check("timestamp", FIXED, *skewed) == []  # a clock 20 s behind is no failure
    reused = [_attempt(1, 0), _attempt(2, 3, ts=WALL)]
    assert "reused or stale" in _check("timestamp", FIXED, *reused)[0]
    ahead = [_attempt(1, 0), _attempt(2, 3, ts=WALL + 3000)]  # 3 s later, in milliseconds
    assert "running ahead of the clock" in _check("timestamp", FIXED, *ahead)[0]
    far = [_attempt(1, 0, ts=WALL - 45)]
    assert "more than --max-skew 30 s" in _check("timestamp", FIXED, *far)[0]


def test_the_listener_reads_id_and_timestamp_of_an_attempt_that_does_not_verify() -> None:
    verifier = Verifier([Secret(SECRET)])
    session = Session("sender.event-id-stable", (S503,), verifier, 2.0, 3)
    stamp = int(time.time())
    headers = verifier.sign(b"{}", event_id="msg_1", timestamp=stamp)
    headers["webhook-signature"] = "v1," + base64.b64encode(bytes(32)).decode()  # a wrong key's

    async def post_once() -> int:
        listener = Listener()
        await listener.start("127.0.0.1", 0)
        try:
            url = listener.open(session)
            async with httpx.AsyncClient() as client:
                return (await client.post(url, content=b"{}", headers=headers)).status_code
        finally:
            await listener.close()

    assert asyncio.run(post_once()) == 503
    (attempt,) = session.attempts
    assert attempt.message is None
    assert (attempt.event_id, attempt.timestamp) == ("msg_1", stamp)


def _unverified(n: int, at: float, event_id: str, ts: float) -> Attempt:
    attempt = _attempt(n, at, event_id=event_id, ts=ts)
    attempt.message, attempt.verify_error = None, "no signature matches an active secret"
    return attempt


def test_a_signing_bug_fails_the_signature_check_only() -> None:
    """The id and the timestamp are judged on attempts whose signature does not verify."""
    stable = [_unverified(1, 0, "msg_1", WALL), _unverified(2, 3, "msg_1", WALL + 3)]
    assert _check("signature", FIXED, *stable)
    assert _check("event_id", FIXED, *stable) == []
    assert _check("timestamp", FIXED, *stable) == []
    changed = [stable[0], _unverified(3, 6, "msg_2", WALL)]
    assert _check("event_id", FIXED, *changed) == [
        "attempt 3 carried event id 'msg_2', attempt 1 'msg_1'"
    ]
    assert "reused or stale" in _check("timestamp", FIXED, *changed)[0]
    no_id = _attempt(2, 3, event_id="")
    assert _check("event_id", FIXED, _attempt(1, 0), no_id) == ["attempt 2 carried no event id"]
    no_stamp = _attempt(2, 3)
    no_stamp.timestamp = None
    assert _check("timestamp", FIXED, _attempt(1, 0), no_stamp) == [
        "attempt 2 carried no timestamp in integer seconds"
    ]


def test_event_id_retry_after_and_in_flight() -> None:
    assert _check("event_id", FIXED, _attempt(1, 0), _attempt(2, 2, event_id="evt_2"))
    limited = _attempt(1, 0, answer=Answer(Kind.STATUS, 429, "seconds"))
    limited.retry_after_s = 3.0
    assert _check("retry_after", FIXED, limited, _attempt(2, 3.0)) == []
    assert _check("retry_after", FIXED, limited, _attempt(2, 2.5))
    open_one = _attempt(1, 0, answer=HOLD, held=2.0)
    assert _check("one_in_flight", FIXED, open_one, _attempt(2, 1.0))
    assert _check("one_in_flight", FIXED, open_one, _attempt(2, 2.0)) == []
    # Seen open when it arrived: in flight, however close the times (a hedged retry whose
    # success closed the held attempt a few ms later).
    hedge = _attempt(2, 1.995)
    hedge.open_held = (1,)
    assert _check("one_in_flight", FIXED, open_one, hedge) == [
        "attempt 2 arrived while attempt 1 was still in flight: its connection was open, "
        "unanswered, and the sender had not closed it"
    ]


def test_a_request_to_a_redirects_location_fails_and_the_3xx_is_judged_by_the_policy() -> None:
    moved = _attempt(1, 0, answer=Answer(Kind.STATUS, 307, location="moved"))
    followed = _attempt(1, 0.004, answer=Answer(Kind.STATUS, 200))
    followed.followed = "/s/run/sender.redirect-not-followed/moved"
    history = History((moved,), FIXED, True, (followed,))
    (problem,) = X_CHECKS["redirect_not_followed"](history)
    assert problem.observed == (
        "the sender followed attempt 1's 307 to its Location: a request arrived at "
        "/s/run/sender.redirect-not-followed/moved 0.00 s after the attempt"
    )
    assert problem.shows[0] is moved
    assert problem.shows[1] is followed
    second = timeline(history.recorded()).splitlines()[1]
    assert second.startswith(
        "redirect of attempt 1 followed to /s/run/sender.redirect-not-followed/"
    )
    assert X_CHECKS["redirect_not_followed"](History((moved,), FIXED, True)) == []
    assert _check("follows_policy", FIXED, moved) == []  # the strict lists stop on 3xx
    ok = Answer(Kind.STATUS, 200)
    assert _check("follows_policy", FIXED, moved, _attempt(2, 2, answer=ok)) == [
        "attempt 2 arrived after attempt 1 got 307 with a Location, which the declared policy "
        "stops on"
    ]


def test_follows_policy_and_the_slack_default() -> None:
    assert _check("follows_policy", FIXED, _attempt(1, 0)) == [
        "no retry after attempt 1 got 503, which the declared policy retries (1 of 8 attempts made)"
    ]
    gone = _attempt(1, 0, answer=Answer(Kind.STATUS, 410))
    assert "stops on" in _check("follows_policy", FIXED, gone, _attempt(2, 2))[0]
    assert (FIXED.slack(1), FIXED.slack(60)) == (0.5, 6.0)
    assert Declared(FIXED.policy, slack_s=0.2).slack(60) == 0.2


def test_a_scenario_waits_past_when_an_attempt_beyond_max_attempts_would_be_due() -> None:
    """A quiet period no longer than the schedule's last delay would race a sender making one
    attempt too many (it arrives as the silence ends): the wait covers its due time plus slack."""
    schedule = FixedSchedule(tuple(timedelta(seconds=s) for s in (0, 1, 1.5)))
    declared = Declared(Policy(backoff=schedule, max_attempts=3), slack_s=0.75, quiet_period_s=1.5)
    harness = SenderHarness(
        Listener(), declared, Verifier([Secret(SECRET)]), secrets=(SECRET,), trigger=None,
        announce=print,
    )  # fmt: skip
    session = Session("sender.max-attempts", (S503,), harness.verifier, 2.75, 3)
    session.attempts[:] = [_attempt(1, 0), _attempt(2, 1.0), _attempt(3, 2.5)]
    assert harness._quiet_until(session) == 2.5 + 1.5 + 0.75  # the 4th is due at +1.5 s
    session.attempts.pop()  # a retry the policy promises: silence counts from when it is due
    assert harness._quiet_until(session) == 1.0 + 1.5 + 0.75 + 1.5
