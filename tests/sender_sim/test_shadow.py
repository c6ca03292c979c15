"""Shadow mode under full jitter: a retry inside the interval the backoff could draw agrees, one
outside it disagrees on the next due time, and one whose due time cannot fit the deadline is a
``deadline`` disagreement; a 401 the strict profile quarantines is a decision disagreement."""

from __future__ import annotations

import json

import pytest

from sender_sim import policy_named
from sender_sim.exceptions import ConfigurationError
from sender_sim.shadow import parse_records, shadow

BASE = {"delivery_id": "d", "attempt": 1, "ended_at": "2026-08-13T09:00:00Z"}
FAR = "2026-08-14T09:00:00Z"


def _kinds(*records: dict[str, object]) -> list[str]:
    lines = [json.dumps({**BASE, **r}) for r in records]
    compared, found = shadow(parse_records(lines), policy_named("strict"))
    assert compared == len(records)
    return [d.kind for d in found]


def test_full_jitter_retries_are_judged_against_the_whole_interval() -> None:
    retry = {"status": 503, "decision": "retry", "deadline_at": FAR}
    # strict: full jitter base 5 s after the first attempt: [09:00:00, 09:00:05]
    assert _kinds({**retry, "next_at": "2026-08-13T09:00:04Z"}) == []
    assert _kinds({**retry, "next_at": "2026-08-13T09:01:00Z"}) == ["next_at"]
    close = {**retry, "deadline_at": "2026-08-13T09:00:32Z", "next_at": "2026-08-13T09:00:04Z"}
    assert _kinds(close) == ["deadline"]


def test_a_quarantined_answer_and_a_wrong_reason_disagree() -> None:
    assert _kinds({"status": 401, "decision": "retry", "deadline_at": FAR}) == ["decision"]
    wrong = {"status": 410, "decision": "dead_letter", "reason": "gone", "deadline_at": FAR}
    assert _kinds(wrong) == ["reason"]
    assert _kinds({"status": 200, "decision": "delivered", "deadline_at": FAR}) == []


def test_a_record_without_an_outcome_is_refused_with_its_line() -> None:
    with pytest.raises(ConfigurationError, match="line 1"):
        list(parse_records([json.dumps({**BASE, "decision": "retry", "deadline_at": FAR})]))
