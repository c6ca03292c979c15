"""What the sender zoos (Node, Java, Go) share: a zoo sender judged by ``hookproof check-sender``
through its JSON report, the policy file that declares it, the control-API senders' process
(Java and Go: one schedule, ``WEBHOOK_*`` settings, ``POST /v/<variant>/deliveries``), and the
checks every zoo makes of the verdicts (a bug's aimed scenarios failed, a must among them; a
signing bug failing only the signature scenario; a followed redirect failing at ``should``
only)."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from conformance.catalogue import CATALOGUE
from conformance.cli import main
from conformance.model import Harness, Severity
from tests.conformance.support import SECRET, SENDER_CHECK_FAST
from tests.support.processes import ServerProcess, free_port

__all__ = [
    "CLASSIFICATION",
    "EACH_ATTEMPT",
    "SENDERS",
    "X_IDS",
    "ZooSender",
    "assert_aimed_failures",
    "assert_fails_at_should",
    "assert_passes_every_scenario",
    "assert_redirect_fails_at_should",
    "assert_signature_fails_alone",
    "breaks_must",
    "control_api_sender",
    "policy_text",
]

X_IDS = frozenset(s.id for s in CATALOGUE.tagged(Harness.X))
"""Every scenario check-sender runs."""

CLASSIFICATION = (
    "[classification]\n"
    'retry = ["408", "429", "5xx", "timeout", "connection"]\n'
    'stop = ["1xx", "3xx", "4xx"]\n'
)
"""What every zoo sender retries and where it stops."""

EACH_ATTEMPT = frozenset(
    {"sender.signature-every-attempt", "sender.event-id-stable", "sender.timestamp-fresh"}
)
"""The scenarios that judge every attempt's headers."""

SENDERS = {"none": "fixed_sender", "full": "jittered_sender"}
"""The fixture serving a zoo sender with each ``WEBHOOK_JITTER``."""


def policy_text(schedule: str, *, max_attempts: int, timeout_s: float) -> str:
    """The policy file declaring a zoo sender: its ``schedule`` lines, its limits, and
    :data:`CLASSIFICATION`."""
    limits = f"max_attempts = {max_attempts}\ntimeout = {timeout_s}\nhonor_retry_after = true\n"
    return schedule + limits + CLASSIFICATION


RETRY_BASE_S = 0.5
RETRY_CAP_S = 2
MAX_ATTEMPTS = 4
TIMEOUT_S = 1
CONTROL_API_POLICIES = {
    "none": f"delays = [0, {RETRY_BASE_S}, {2 * RETRY_BASE_S}, {RETRY_CAP_S}]\n",
    "full": f'backoff = "full-jitter"\nbase = {RETRY_BASE_S}\ncap = {RETRY_CAP_S}\n',
}
"""The policy file declaring a control-API sender by its ``WEBHOOK_JITTER``: ``none`` waits
exactly min(cap, base * 2^(n-1)) after attempt n (0.5 s, 1 s, 2 s), ``full`` a uniform draw below
it. The first wait (0.5 s) is shorter than the timeout, so overlapping attempts are seen."""

TRIGGER_SCRIPT = (
    "import os, sys, urllib.request as u; "
    "u.urlopen(u.Request(sys.argv[1], data=os.environ['HOOKPROOF_TARGET_URL'].encode(), "
    "method='POST'), timeout=10)"
)
"""What ``--trigger`` runs: POST the scenario's URL to the sender's control API (curl's job, in
the standard library so the test needs nothing more)."""


class ZooSender:
    """One zoo sender process (every variant) and the policy file that declares it;
    ``trigger_for`` is the ``--trigger`` command that makes ``variant`` send one event."""

    def __init__(self, policy: Path, trigger_for: Callable[[str], str]) -> None:
        self.policy = policy
        self.trigger_for = trigger_for

    def judge(
        self, variant: str, report: Path, select: frozenset[str] = frozenset()
    ) -> tuple[int, dict[str, dict[str, Any]]]:
        """Run ``hookproof check-sender`` on ``variant``; its exit status and scenarios by id."""
        code = main(
            [
                "check-sender",
                *("--secret", SECRET, "--policy", str(self.policy)),
                *("--trigger", self.trigger_for(variant)),
                *SENDER_CHECK_FAST,
                *(arg for scenario in sorted(select) for arg in ("--select", scenario)),
                *("--json", str(report)),
            ]
        )
        scenarios = json.loads(report.read_text())["scenarios"]
        return code, {s["id"]: s for s in scenarios}


@contextmanager
def control_api_sender(
    argv: Sequence[str], jitter: str, folder: Path, env: Mapping[str, str] | None = None
) -> Iterator[ZooSender]:
    """A control-API zoo sender (Java, Go): ``argv`` started with ``WEBHOOK_JITTER=jitter``, the
    schedule above and ``env``; the policy file declaring it written in ``folder``; each
    variant triggered by :data:`TRIGGER_SCRIPT` on ``POST /v/<variant>/deliveries``."""
    policy = folder / "policy.toml"
    schedule = CONTROL_API_POLICIES[jitter]
    policy.write_text(policy_text(schedule, max_attempts=MAX_ATTEMPTS, timeout_s=TIMEOUT_S))
    port = free_port()
    settings = {
        "WEBHOOK_SECRET": SECRET,
        "WEBHOOK_BASE_DELAY": str(RETRY_BASE_S),
        "WEBHOOK_MAX_DELAY": str(RETRY_CAP_S),
        "WEBHOOK_JITTER": jitter,
        "WEBHOOK_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
        "WEBHOOK_TIMEOUT": str(TIMEOUT_S),
        "PORT": str(port),
        **(env or {}),
    }
    base = f"http://127.0.0.1:{port}"

    def trigger(variant: str) -> str:
        control = f"{base}/v/{variant}/deliveries"
        return shlex.join([sys.executable, "-c", TRIGGER_SCRIPT, control])

    with ServerProcess.start(list(argv), env=settings, ready_url=f"{base}/healthz") as server:
        yield ZooSender(policy, trigger)
        server.close()


def assert_passes_every_scenario(sender: ZooSender, variant: str, report: Path) -> None:
    """``variant`` passes every sender scenario and check-sender exits 0."""
    code, scenarios = sender.judge(variant, report)
    outcomes = {sid: s["outcome"] for sid, s in scenarios.items()}
    assert outcomes == dict.fromkeys(X_IDS, "passed"), scenarios
    assert code == 0


NO_BACKOFF_SAYS = "the gaps look like no backoff at all"
"""What the statistical no-backoff check says (docs/check-sender.md): a full-jitter sender whose
draws are all small fails it by chance (about 2e-4 per scenario for draws below 0.5 s)."""


def failed_by_chance(scenarios: dict[str, dict[str, Any]]) -> set[str]:
    """The failed scenarios whose every failure is the no-backoff check's: under full jitter,
    draws that all happened to be short, the documented chance."""
    return {
        sid
        for sid, scenario in scenarios.items()
        if scenario["outcome"] == "failed"
        and scenario["failures"]
        and all(NO_BACKOFF_SAYS in f["observed"] for f in scenario["failures"])
    }


def breaks_must(scenario: dict[str, Any]) -> bool:
    """Whether a scenario of the JSON report failed a ``must`` or errored."""
    outcome, severity = str(scenario["outcome"]), str(scenario["severity"])
    return outcome == "error" or (outcome == "failed" and severity == Severity.MUST.value)


def assert_aimed_failures(
    code: int, scenarios: dict[str, dict[str, Any]], bug: str, must_fail: frozenset[str]
) -> None:
    """``bug`` failed every scenario aimed at it, a ``must`` among them, with a reproduction
    that shows the timeline and no secret."""
    assert code == 1
    failed = {sid for sid, s in scenarios.items() if s["outcome"] == "failed"}
    assert must_fail <= failed, (bug, scenarios)
    assert any(breaks_must(scenarios[sid]) for sid in must_fail), bug
    for scenario_id in must_fail:
        failure = scenarios[scenario_id]["failures"][0]
        assert failure["expected"]
        assert failure["observed"]
        assert "attempt 1 at +0.000 s" in failure["reproduce"]
        assert SECRET not in failure["reproduce"] + failure["observed"]


def assert_signature_fails_alone(scenarios: dict[str, dict[str, Any]]) -> None:
    """Of :data:`EACH_ATTEMPT`, only the signature scenario failed: the id and the timestamps
    are read from every attempt's headers, verified or not."""
    outcomes = {sid: s["outcome"] for sid, s in scenarios.items()}
    assert outcomes == {
        "sender.signature-every-attempt": "failed",
        "sender.event-id-stable": "passed",
        "sender.timestamp-fresh": "passed",
    }, scenarios


def assert_fails_at_should(
    code: int, scenarios: dict[str, dict[str, Any]], should_fail: frozenset[str], observed: str
) -> list[dict[str, Any]]:
    """Each of ``should_fail`` fails once, at ``should``, saying ``observed``; the run exits 0.
    The failures, for more checks of their own."""
    assert code == 0  # only should-level expectations failed
    failures = []
    for scenario_id in should_fail:
        scenario = scenarios[scenario_id]
        assert (scenario["outcome"], scenario["severity"]) == ("failed", "should"), scenario
        (failure,) = scenario["failures"]
        assert observed in failure["observed"], failure
        failures.append(failure)
    return failures


def assert_redirect_fails_at_should(
    code: int, scenarios: dict[str, dict[str, Any]], should_fail: frozenset[str]
) -> None:
    """The sender followed attempt 1's 307: a ``should`` failure each, and the run exits 0."""
    followed = "followed attempt 1's 307 to its Location"
    for failure in assert_fails_at_should(code, scenarios, should_fail, followed):
        assert "redirect of attempt 1 followed to /s/" in failure["reproduce"]
