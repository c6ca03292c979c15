"""The TOML policy file: delays or full jitter, attempts, timeout, Retry-After and a classification
where an exact status beats its class; every mistake names the key."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from sender_sim.classify import Action, Outcome
from sender_sim.exceptions import ConfigurationError
from sender_sim.policy import FixedSchedule, FullJitter
from sender_sim.policy_file import load_policy_file, policy_from_mapping
from sender_sim.records import OutcomeKind


def _action(policy_doc: dict[str, object], status: int) -> Action:
    return policy_from_mapping(policy_doc).profile.classify(Outcome.response(status)).action


def test_delays_attempts_timeout_and_the_default_strict_classification(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('delays = [0, "1m", 2.5]\nmax_attempts = 4\ntimeout = "1500ms"\n')
    policy = load_policy_file(path)
    assert policy.backoff == FixedSchedule(
        (timedelta(0), timedelta(minutes=1), timedelta(seconds=2.5))
    )
    assert (policy.max_attempts, policy.timeout) == (4, timedelta(seconds=1.5))
    verdicts = {s: policy.profile.classify(Outcome.response(s)) for s in (204, 301, 410, 429, 503)}
    assert [verdicts[s].action for s in (204, 301, 410, 429, 503)] == [
        Action.DELIVERED, Action.DEAD_LETTER, Action.DEAD_LETTER, Action.RETRY, Action.RETRY,
    ]  # fmt: skip
    assert verdicts[429].honor_retry_after
    assert policy.profile.classify(Outcome.failure(OutcomeKind.TIMEOUT)).action is Action.RETRY


def test_full_jitter_and_an_exact_status_beating_its_class() -> None:
    doc: dict[str, object] = {
        "backoff": "full-jitter", "base": 1, "cap": 2, "honor_retry_after": False,
        "classification": {"retry": ["409", "5xx"], "stop": ["4xx", "503", "connection"]},
    }  # fmt: skip
    policy = policy_from_mapping(doc)
    assert policy.backoff == FullJitter(timedelta(seconds=1), timedelta(seconds=2))
    assert _action(doc, 409) is Action.RETRY
    assert _action(doc, 404) is Action.DEAD_LETTER
    assert _action(doc, 503) is Action.DEAD_LETTER
    assert _action(doc, 500) is Action.RETRY
    assert _action(doc, 200) is Action.DELIVERED
    assert not policy.profile.classify(Outcome.response(500, "1")).honor_retry_after
    reset = policy.profile.classify(Outcome.failure(OutcomeKind.NETWORK))
    assert reset.action is Action.DEAD_LETTER


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ({"delays": [0], "max_atempts": 3}, "unknown key 'max_atempts'"),
        ({"delays": [0], "backoff": "full-jitter"}, "either 'delays' or 'backoff'"),
        ({"delays": []}, "non-empty list"),
        ({"delays": ["soon"]}, "delays: 'soon' is not a duration"),
        ({"delays": [-1]}, "must not be negative"),
        ({"delays": [0, float("inf")]}, "delays: inf is not a finite number of seconds"),
        ({"delays": [0], "timeout": float("nan")}, "timeout: nan is not a finite number"),
        ({"delays": [0, 1e300]}, "delays: 1e[+]300 is too long a duration"),
        ({"backoff": "linear"}, "full-jitter"),
        ({"delays": [0], "classification": {"retry": ["6xx"]}}, "'6xx' is not a status"),
        ({"delays": [0], "classification": {"later": []}}, "unknown key 'later'"),
        ({"delays": [0], "max_attempts": 0}, "max_attempts"),
        ({"delays": [0], "honor_retry_after": "yes"}, "honor_retry_after"),
    ],
)
def test_mistakes_name_the_key(doc: dict[str, object], says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        policy_from_mapping(doc)


def test_an_unreadable_or_invalid_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_policy_file(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("delays = [0,")
    with pytest.raises(ConfigurationError, match="not valid TOML"):
        load_policy_file(bad)
