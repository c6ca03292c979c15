"""``hookproof check-sender`` against senders written independently in Java 17 with the JDK alone
(``java_sender/WebhookSender.java``: ``java.net.http.HttpClient``, ``javax.crypto.Mac``,
``ScheduledExecutorService``; written from docs/check-sender.md and the Standard Webhooks spec, not
from the catalogue), triggered as an outside platform team would: ``--trigger`` POSTs the
scenario's URL to the sender's control API, over real HTTP on loopback.

The correct variant passes every scenario, with a fixed exponential schedule and with full
jitter; each broken variant fails the scenarios aimed at its bug, a ``must`` among them (following
a redirect fails at ``should`` only). The JVM runs under ``LC_ALL=C``, as in a bare container, so
its platform charset is ASCII and signing ``String.getBytes()`` differs from the UTF-8 body.
A bug check-sender cannot see (a fixed 1 s wait inside full-jitter ceilings) is a strict xfail.
Skipped, saying why, where no JDK >= 17 is installed.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from conformance.catalogue import CATALOGUE
from conformance.cli import main
from conformance.model import Harness, Severity
from tests.conformance.support import SECRET, SENDER_CHECK_FAST
from tests.support.processes import ServerProcess, free_port

pytestmark = pytest.mark.subprocess

SOURCE = Path(__file__).resolve().parent / "java_sender" / "WebhookSender.java"
X_IDS = frozenset(s.id for s in CATALOGUE.tagged(Harness.X))

RETRY_BASE_S = 0.5
RETRY_CAP_S = 2
MAX_ATTEMPTS = 4
TIMEOUT_S = 1
CLASSIFICATION = (
    "[classification]\n"
    'retry = ["408", "429", "5xx", "timeout", "connection"]\n'
    'stop = ["1xx", "3xx", "4xx"]\n'
)
POLICIES = {
    "none": f"delays = [0, {RETRY_BASE_S}, {2 * RETRY_BASE_S}, {RETRY_CAP_S}]\n",
    "full": f'backoff = "full-jitter"\nbase = {RETRY_BASE_S}\ncap = {RETRY_CAP_S}\n',
}
"""The policy file declaring what WebhookSender.java does, by its WEBHOOK_JITTER: ``none`` waits
exactly min(cap, base * 2^(n-1)) after attempt n (0.5 s, 1 s, 2 s), ``full`` a uniform draw below
it. The first wait (0.5 s) is shorter than the timeout, so overlapping attempts are seen."""

JAVA_MUST_FAIL: dict[str, frozenset[str]] = {
    "no-request-timeout": frozenset({"sender.retry-timeout"}),
    "millis-timestamp": frozenset({"sender.timestamp-fresh", "sender.signature-every-attempt"}),
    "sign-once": frozenset({"sender.timestamp-fresh"}),
    "uuid-per-attempt": frozenset({"sender.event-id-stable"}),
    "platform-charset": frozenset({"sender.signature-every-attempt"}),
    "retry-after-int-only": frozenset({"sender.retry-after-date"}),
    "retry-every-non-2xx": frozenset(
        {
            "sender.stop-after-410",
            "sender.unauthorized",
            "sender.forbidden",
            "sender.client-error",
            "sender.redirect-not-followed",
        }
    ),
    "fixed-delay": frozenset({"sender.schedule-delays"}),
    # The overlap itself is a should (sender.one-in-flight); the must it breaks is that an
    # attempt scheduled before its answer arrived cannot honour that answer's Retry-After.
    "async-overlap": frozenset(
        {"sender.one-in-flight", "sender.retry-after-seconds", "sender.retry-after-date"}
    ),
    "ioexception-delivered": frozenset({"sender.retry-reset"}),
}
"""For each broken Java variant (the table atop WebhookSender.java), the scenarios observed to
fail on the fixed schedule."""

JAVA_SHOULD_FAIL: dict[str, frozenset[str]] = {
    "follow-redirects": frozenset({"sender.redirect-not-followed"}),
}
"""Broken variants that fail only ``should`` expectations (the run still exits 0)."""

JAVA_UNSEEN: dict[tuple[str, str], str] = {
    ("fixed-delay", "full"): "a fixed 1 s wait lies within the full-jitter ceilings (0.5 s, 1 s, "
    "2 s) plus slack, and is far above 3 % of them: it looks like a valid jittered draw",
}
"""The broken variants (with a jitter) check-sender passes on every ``must``, and why."""


def _policy_text(jitter: str) -> str:
    limits = f"max_attempts = {MAX_ATTEMPTS}\ntimeout = {TIMEOUT_S}\nhonor_retry_after = true\n"
    return POLICIES[jitter] + limits + CLASSIFICATION


def _unavailable() -> str | None:
    """Why the Java senders cannot run here (``None``: they can)."""
    for tool in ("javac", "java"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (the Java senders of the zoo need a JDK >= 17)"
    version = subprocess.run(["javac", "-version"], capture_output=True, text=True, timeout=60)
    found = re.search(r"javac (\d+)", version.stdout + version.stderr)
    if found is None or int(found.group(1)) < 17:
        return f"the Java senders need javac >= 17, found {version.stdout + version.stderr!r}"
    return None


TRIGGER_SCRIPT = (
    "import os, sys, urllib.request as u; "
    "u.urlopen(u.Request(sys.argv[1], data=os.environ['HOOKPROOF_TARGET_URL'].encode(), "
    "method='POST'), timeout=10)"
)
"""What ``--trigger`` runs: POST the scenario's URL to the sender's control API (curl's job, in
the standard library so the test needs nothing more)."""


class JavaSender:
    """One WebhookSender.java process (every variant) and the policy file that declares it."""

    def __init__(self, base_url: str, policy: Path) -> None:
        self.base_url = base_url
        self.policy = policy

    def judge(
        self, variant: str, report: Path, select: frozenset[str] = frozenset()
    ) -> tuple[int, dict[str, dict[str, Any]]]:
        """Run ``hookproof check-sender`` on ``variant``; its exit status and scenarios by id."""
        control = f"{self.base_url}/v/{variant}/deliveries"
        trigger = shlex.join([sys.executable, "-c", TRIGGER_SCRIPT, control])
        code = main(
            [
                "check-sender",
                *("--secret", SECRET, "--policy", str(self.policy), "--trigger", trigger),
                *SENDER_CHECK_FAST,
                *(arg for scenario in sorted(select) for arg in ("--select", scenario)),
                *("--json", str(report)),
            ]
        )
        scenarios = json.loads(report.read_text())["scenarios"]
        return code, {s["id"]: s for s in scenarios}


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = _unavailable()
    if reason is not None:
        pytest.skip(reason)
    classes = tmp_path_factory.mktemp("java-sender-classes")
    compiled = subprocess.run(
        ["javac", "-encoding", "UTF-8", "-d", str(classes), str(SOURCE)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert compiled.returncode == 0, compiled.stderr
    return classes


@contextmanager
def _serving(
    jitter: str, classes: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JavaSender]:
    policy = tmp_path_factory.mktemp(f"java-policy-{jitter}") / "policy.toml"
    policy.write_text(_policy_text(jitter))
    port = free_port()
    env = {
        "WEBHOOK_SECRET": SECRET,
        "WEBHOOK_BASE_DELAY": str(RETRY_BASE_S),
        "WEBHOOK_MAX_DELAY": str(RETRY_CAP_S),
        "WEBHOOK_JITTER": jitter,
        "WEBHOOK_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
        "WEBHOOK_TIMEOUT": str(TIMEOUT_S),
        "PORT": str(port),
        "LC_ALL": "C",  # a bare container: the platform charset is ASCII
        "LANG": "C",
    }
    base = f"http://127.0.0.1:{port}"
    argv = ["java", "-cp", str(classes), "WebhookSender"]
    with ServerProcess.start(argv, env=env, ready_url=f"{base}/healthz") as server:
        yield JavaSender(base, policy)
        server.close()


@pytest.fixture(scope="module")
def fixed_sender(
    java_classes: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JavaSender]:
    """WebhookSender.java with WEBHOOK_JITTER=none: waits of exactly 0.5 s, 1 s, 2 s."""
    with _serving("none", java_classes, tmp_path_factory) as sender:
        yield sender


@pytest.fixture(scope="module")
def jittered_sender(
    java_classes: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JavaSender]:
    """WebhookSender.java with WEBHOOK_JITTER=full: waits drawn below 0.5 s, 1 s, 2 s."""
    with _serving("full", java_classes, tmp_path_factory) as sender:
        yield sender


SENDERS = {"none": "fixed_sender", "full": "jittered_sender"}
"""The fixture serving WebhookSender.java with each WEBHOOK_JITTER."""


def _breaks_must(scenario: dict[str, Any]) -> bool:
    """Whether a scenario of the JSON report failed a ``must`` or errored."""
    outcome, severity = str(scenario["outcome"]), str(scenario["severity"])
    return outcome == "error" or (outcome == "failed" and severity == Severity.MUST.value)


@pytest.mark.parametrize("jitter", sorted(SENDERS))
def test_the_correct_java_sender_passes_every_sender_scenario(
    request: pytest.FixtureRequest, tmp_path: Path, jitter: str
) -> None:
    sender: JavaSender = request.getfixturevalue(SENDERS[jitter])
    code, scenarios = sender.judge("correct", tmp_path / "report.json")
    outcomes = {sid: s["outcome"] for sid, s in scenarios.items()}
    assert outcomes == dict.fromkeys(X_IDS, "passed"), scenarios
    assert code == 0


@pytest.mark.parametrize(("bug", "must_fail"), sorted(JAVA_MUST_FAIL.items()))
def test_a_broken_java_sender_fails_the_scenarios_aimed_at_its_bug(
    fixed_sender: JavaSender, tmp_path: Path, bug: str, must_fail: frozenset[str]
) -> None:
    code, scenarios = fixed_sender.judge(bug, tmp_path / "report.json", select=must_fail)
    assert code == 1
    failed = {sid for sid, s in scenarios.items() if s["outcome"] == "failed"}
    assert must_fail <= failed, (bug, scenarios)
    assert any(_breaks_must(scenarios[sid]) for sid in must_fail), bug
    for scenario_id in must_fail:
        failure = scenarios[scenario_id]["failures"][0]
        assert failure["expected"]
        assert failure["observed"]
        assert "attempt 1 at +0.000 s" in failure["reproduce"]
        assert SECRET not in failure["reproduce"] + failure["observed"]


EACH_ATTEMPT = frozenset(
    {"sender.signature-every-attempt", "sender.event-id-stable", "sender.timestamp-fresh"}
)


def test_a_charset_bug_fails_the_signature_scenario_only(
    fixed_sender: JavaSender, tmp_path: Path
) -> None:
    """Signed over ASCII-replaced bytes, the UTF-8 body never verifies, but its id and timestamps
    are right: they are read from every attempt's headers, verified or not."""
    _, scenarios = fixed_sender.judge(
        "platform-charset", tmp_path / "report.json", select=EACH_ATTEMPT
    )
    outcomes = {sid: s["outcome"] for sid, s in scenarios.items()}
    assert outcomes == {
        "sender.signature-every-attempt": "failed",
        "sender.event-id-stable": "passed",
        "sender.timestamp-fresh": "passed",
    }, scenarios


@pytest.mark.parametrize(("bug", "should_fail"), sorted(JAVA_SHOULD_FAIL.items()))
def test_a_java_sender_breaking_a_recommendation_fails_at_should(
    fixed_sender: JavaSender, tmp_path: Path, bug: str, should_fail: frozenset[str]
) -> None:
    code, scenarios = fixed_sender.judge(bug, tmp_path / "report.json", select=should_fail)
    assert code == 0  # only should-level expectations failed
    for scenario_id in should_fail:
        scenario = scenarios[scenario_id]
        assert (scenario["outcome"], scenario["severity"]) == ("failed", "should"), scenario
        (failure,) = scenario["failures"]
        assert "followed attempt 1's 307 to its Location" in failure["observed"]
        assert "redirect of attempt 1 followed to /s/" in failure["reproduce"]


@pytest.mark.parametrize(
    ("bug", "jitter"),
    [
        pytest.param(bug, jitter, marks=pytest.mark.xfail(strict=True, reason=reason))
        for (bug, jitter), reason in sorted(JAVA_UNSEEN.items())
    ],
)
def test_a_bug_check_sender_cannot_see_breaks_no_must(
    request: pytest.FixtureRequest, tmp_path: Path, bug: str, jitter: str
) -> None:
    """Strict xfails: each passes the moment a scenario catches the bug at ``must`` level."""
    sender: JavaSender = request.getfixturevalue(SENDERS[jitter])
    _, scenarios = sender.judge(bug, tmp_path / "report.json")
    assert set(scenarios) == X_IDS
    assert [sid for sid, s in scenarios.items() if _breaks_must(s)], bug
