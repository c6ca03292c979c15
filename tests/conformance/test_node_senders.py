"""``hookproof check-sender`` against senders written independently in Node
(``node_sender/sender.js``: node:http and node:crypto, the Standard Webhooks spec, no npm), as an
outside platform team triggers them: ``--trigger`` runs ``node_sender/trigger.js``, which calls
the sender's test API, over real HTTP on loopback.

The correct variant passes every scenario, with a fixed exponential schedule and with full
jitter; each broken variant fails the scenarios aimed at its bug, a ``must`` among them (following
a redirect fails at ``should``: Standard Webhooks recommends, not requires, not following it). The
bugs check-sender cannot see from outside (a 3xx counted as delivered where the policy stops on
3xx; no scenario answers a 2xx with a slow body) are strict xfails, so a scenario that starts to
see one shows up.
Skipped, saying why, where ``node`` is not installed.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conformance.sender_zoos import (
    EACH_ATTEMPT,
    SENDERS,
    X_IDS,
    ZooSender,
    assert_aimed_failures,
    assert_fails_at_should,
    assert_passes_every_scenario,
    assert_redirect_fails_at_should,
    assert_signature_fails_alone,
    breaks_must,
    policy_text,
)
from tests.conformance.support import SECRET
from tests.support.processes import ServerProcess, free_port

pytestmark = pytest.mark.subprocess

HERE = Path(__file__).resolve().parent / "node_sender"

RETRY_BASE_S = 1
RETRY_CAP_S = 2
MAX_ATTEMPTS = 4
TIMEOUT_S = 1
POLICIES = {
    "none": f"delays = [0, {RETRY_BASE_S}, {RETRY_CAP_S}]\n",
    "full": f'backoff = "full-jitter"\nbase = {RETRY_BASE_S}\ncap = {RETRY_CAP_S}\n',
}
"""The policy file declaring what sender.js does, by its WEBHOOK_JITTER: ``none`` waits exactly
min(cap, base * 2^(n-1)) after attempt n, ``full`` a uniform draw below it."""

NODE_MUST_FAIL: dict[str, frozenset[str]] = {
    "new-id-per-retry": frozenset({"sender.event-id-stable"}),
    "stale-signature": frozenset({"sender.timestamp-fresh"}),
    "reserialized-body": frozenset({"sender.signature-every-attempt"}),
    "raw-whsec-key": frozenset({"sender.signature-every-attempt"}),
    "retry-any-4xx": frozenset(
        {"sender.stop-after-410", "sender.unauthorized", "sender.forbidden", "sender.client-error"}
    ),
    "delay-in-seconds": frozenset(
        {"sender.schedule-delays", "sender.retry-after-seconds", "sender.retry-after-date"}
    ),
    "backoff-not-awaited": frozenset({"sender.schedule-delays"}),
    "ignore-retry-after": frozenset({"sender.retry-after-seconds", "sender.retry-after-date"}),
    "retry-after-int": frozenset({"sender.retry-after-date"}),
    "no-timeout": frozenset({"sender.retry-timeout"}),
    "timeout-not-aborted": frozenset({"sender.retry-timeout", "sender.one-in-flight"}),
    "no-cap": frozenset({"sender.max-attempts"}),
    "parallel-copies": frozenset({"sender.no-retry-after-2xx", "sender.one-in-flight"}),
    "reset-as-delivered": frozenset({"sender.retry-reset"}),
    "ms-timestamp": frozenset({"sender.timestamp-fresh", "sender.signature-every-attempt"}),
    "attempt-in-body": frozenset({"sender.body-identical"}),
}
"""For each broken Node variant (``BUGS`` in sender.js), the scenarios that must fail (fixed
schedule)."""

NODE_MUST_FAIL_JITTERED: dict[str, frozenset[str]] = {
    "backoff-not-awaited": frozenset({"sender.schedule-delays"}),
}
"""The same under full jitter, where every single wait may be 0 s: waits all near 0 s on three
gaps look like no backoff at all."""

NODE_SHOULD_FAIL: dict[str, frozenset[str]] = {
    "follow-redirects": frozenset({"sender.redirect-not-followed"}),
    # the policy file honours Retry-After on every retried status (its default)
    "retry-after-429-only": frozenset({"sender.retry-after-503"}),
}
"""Broken variants that fail only ``should`` expectations (the run still exits 0)."""

NODE_UNSEEN: dict[tuple[str, str], str] = {
    ("3xx-as-success", "none"): "the policy stops on 3xx: delivered and stopped look alike",
    ("slow-body-failure", "none"): "no sender.* scenario answers a 2xx with a slow body",
}
"""The broken variants (with a jitter) check-sender passes on every ``must``, and why."""


def _trigger(base: str, variant: str) -> str:
    """``node trigger.js`` on ``variant``'s test API: one new message."""
    return shlex.join(["node", str(HERE / "trigger.js"), f"{base}/v/{variant}/messages"])


@contextmanager
def _serving(jitter: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooSender]:
    if shutil.which("node") is None:
        pytest.skip("node is not installed (the Node senders of the zoo need node >= 18)")
    policy = tmp_path_factory.mktemp(f"policy-{jitter}") / "policy.toml"
    policy.write_text(policy_text(POLICIES[jitter], max_attempts=MAX_ATTEMPTS, timeout_s=TIMEOUT_S))
    port = free_port()
    env = {
        "WEBHOOK_SECRET": SECRET,
        "WEBHOOK_RETRY_BASE": str(RETRY_BASE_S),
        "WEBHOOK_RETRY_CAP": str(RETRY_CAP_S),
        "WEBHOOK_JITTER": jitter,
        "WEBHOOK_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
        "WEBHOOK_TIMEOUT": str(TIMEOUT_S),
        "PORT": str(port),
    }
    base = f"http://127.0.0.1:{port}"
    with ServerProcess.start(
        ["node", "sender.js"], env=env, cwd=HERE, ready_url=f"{base}/healthz"
    ) as server:
        yield ZooSender(policy, lambda variant: _trigger(base, variant))
        server.close()


@pytest.fixture(scope="module")
def fixed_sender(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooSender]:
    """sender.js with WEBHOOK_JITTER=none: waits of exactly 1 s, 2 s, 2 s."""
    with _serving("none", tmp_path_factory) as sender:
        yield sender


@pytest.fixture(scope="module")
def jittered_sender(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooSender]:
    """sender.js with WEBHOOK_JITTER=full: waits drawn below 1 s, 2 s, 2 s."""
    with _serving("full", tmp_path_factory) as sender:
        yield sender


@pytest.mark.parametrize("jitter", sorted(SENDERS))
def test_the_correct_node_sender_passes_every_sender_scenario(
    request: pytest.FixtureRequest, tmp_path: Path, jitter: str
) -> None:
    sender: ZooSender = request.getfixturevalue(SENDERS[jitter])
    assert_passes_every_scenario(sender, "correct", tmp_path / "report.json")


@pytest.mark.parametrize(
    ("jitter", "bug", "must_fail"),
    [
        *(("none", bug, must_fail) for bug, must_fail in sorted(NODE_MUST_FAIL.items())),
        *(("full", bug, must_fail) for bug, must_fail in sorted(NODE_MUST_FAIL_JITTERED.items())),
    ],
)
def test_a_broken_node_sender_fails_the_scenarios_aimed_at_its_bug(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    jitter: str,
    bug: str,
    must_fail: frozenset[str],
) -> None:
    sender: ZooSender = request.getfixturevalue(SENDERS[jitter])
    code, scenarios = sender.judge(bug, tmp_path / "report.json", select=must_fail)
    assert_aimed_failures(code, scenarios, bug, must_fail)


SIGNING_BUGS = ("raw-whsec-key", "reserialized-body")
"""Variants that sign wrongly but keep a stable id and fresh timestamps on every attempt."""


@pytest.mark.parametrize("bug", SIGNING_BUGS)
def test_a_signing_bug_fails_the_signature_scenario_only(
    fixed_sender: ZooSender, tmp_path: Path, bug: str
) -> None:
    """The id and the timestamp are read from every attempt's headers, verified or not: no
    cascade of 'no attempt verified' failures hides that they were right."""
    _, scenarios = fixed_sender.judge(bug, tmp_path / "report.json", select=EACH_ATTEMPT)
    assert_signature_fails_alone(scenarios)


@pytest.mark.parametrize(("bug", "should_fail"), sorted(NODE_SHOULD_FAIL.items()))
def test_a_node_sender_breaking_a_recommendation_fails_at_should(
    fixed_sender: ZooSender, tmp_path: Path, bug: str, should_fail: frozenset[str]
) -> None:
    code, scenarios = fixed_sender.judge(bug, tmp_path / "report.json", select=should_fail)
    if bug == "follow-redirects":
        assert_redirect_fails_at_should(code, scenarios, should_fail)
    else:
        assert_fails_at_should(
            code, scenarios, should_fail, "after the 503, before its Retry-After"
        )


@pytest.mark.parametrize(
    ("bug", "jitter"),
    [
        pytest.param(bug, jitter, marks=pytest.mark.xfail(strict=True, reason=reason))
        for (bug, jitter), reason in sorted(NODE_UNSEEN.items())
    ],
)
def test_a_bug_check_sender_cannot_see_breaks_no_must(
    request: pytest.FixtureRequest, tmp_path: Path, bug: str, jitter: str
) -> None:
    """Strict xfails: each passes the moment a scenario catches the bug at ``must`` level."""
    sender: ZooSender = request.getfixturevalue(SENDERS[jitter])
    _, scenarios = sender.judge(bug, tmp_path / "report.json")
    assert set(scenarios) == X_IDS
    assert [sid for sid, s in scenarios.items() if breaks_must(s)], bug
