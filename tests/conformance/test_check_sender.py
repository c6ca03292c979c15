"""``hookproof check-sender`` over real loopback HTTP: our own ``hookproof send`` passes every
``sender.*`` scenario; an independent sender script passes them too and, with one seeded bug per
scenario, is caught by the scenario aimed at that bug; a failing or silent trigger is one error
line per scenario, a missing one exit 2 before any scenario; manual mode; ``--max-time``.

Every run uses a seconds-scale compressed schedule and runs its scenarios concurrently.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import sys
import time
import tomllib
import xml.etree.ElementTree as ET
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from conformance.catalogue import CATALOGUE
from conformance.cli import main
from conformance.events import RunFinished
from conformance.model import Harness, Side
from conformance.results import Summary
from conformance.sender_check import SenderCheckSettings, run_sender_check
from conformance.sender_check.demo import DEMO_POLICY, send_trigger
from conformance.sender_check.judging import X_CHECKS
from conformance.sender_check.script import ACTIONS
from receiver.signing import Secret, Verifier
from sender_sim.policy import FixedSchedule, FullJitter
from sender_sim.policy_file import policy_from_mapping
from tests.conformance.report_schema import validate_report
from tests.conformance.support import SENDER_CHECK_FAST as FAST
from tests.support.cli import usage_error_line

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
X_IDS = [s.id for s in CATALOGUE.tagged(Harness.X)]
BROKEN = Path(__file__).with_name("broken_sender.py")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "check-sender.md"
SCRIPT = f"{shlex.quote(sys.executable)} {shlex.quote(str(BROKEN))} --delays 0,1,1.5"

AIMED = {
    "sender.signature-every-attempt": ("wrong-signature-on-retries", "does not verify"),
    "sender.timestamp-fresh": ("reused-timestamp", "reused or stale timestamp"),
    "sender.event-id-stable": ("new-id-per-retry", "carried event id"),
    "sender.body-identical": ("reserialised-body", "body differs"),
    "sender.retry-503": ("no-retry-503", "no retry after attempt 1 got 503"),
    "sender.retry-reset": ("no-retry-reset", "no retry after attempt 1 got connection reset"),
    "sender.stop-after-410": ("retry-after-410", "after attempt 1 got 410"),
    "sender.no-retry-after-2xx": ("retry-after-2xx", "after attempt 1 got 200"),
    "sender.retry-after-seconds": ("ignore-retry-after", "before its Retry-After"),
    "sender.max-attempts": ("too-many-attempts", "more than max_attempts 3"),
    "sender.retry-timeout": ("no-timeout", "still waiting on attempt 1"),
    "sender.schedule-delays": ("fast-retries", "declared 1 s"),
    "sender.one-in-flight": ("overlapping-retries", "still in flight"),
    "sender.redirect-not-followed": (
        "follows-redirects",
        "followed attempt 1's 307 to its Location",
    ),
}
"""Each seeded bug of the independent sender, the scenario aimed at it, and what it must say."""


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("policy") / "policy.toml"
    path.write_text(DEMO_POLICY)
    return path


def _run(*arguments: str) -> int:
    return main(["check-sender", "--secret", SECRET, *arguments])


def _observed(scenario: dict[str, Any]) -> str:
    """What every failure of a report's ``scenario`` observed, in one line."""
    return " | ".join(f["observed"] for f in scenario["failures"])


def _one_bug(
    policy: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    scenario_id: str,
    bug: str,
    scheme: str = "standard",
) -> tuple[int, dict[str, Any]]:
    """The exit code and the report's one scenario of ``scenario_id`` run against the broken
    sender (signing the ``scheme`` way) committing ``bug`` in it (``""``: none)."""
    monkeypatch.setenv("BROKEN_SENDER_BUGS", json.dumps({scenario_id: bug} if bug else {}))
    report = tmp_path / f"report-{bug or 'honest'}.json"
    code = _run(
        "--trigger", f"{SCRIPT} --scheme {scheme}", "--scheme", scheme, "--policy", str(policy),
        *FAST, "--select", scenario_id, "--json", str(report),
    )  # fmt: skip
    (scenario,) = json.loads(report.read_text())["scenarios"]
    return code, scenario


def test_every_sender_scenario_is_interpretable() -> None:
    assert len(X_IDS) >= 15
    for scenario in CATALOGUE.tagged(Harness.X):
        assert scenario.tags == frozenset({Harness.X}), scenario.id
        assert scenario.family == "sender"
        assert all(step.action in ACTIONS for step in scenario.steps)
        assert all(e.check in X_CHECKS for e in scenario.expectations_of(Side.SENDER))
        assert scenario.expectations_of(Side.SENDER)


def test_hookproof_send_passes_every_sender_scenario(
    policy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = {kind: tmp_path / f"report.{kind}" for kind in ("json", "junit", "ndjson")}
    trigger = send_trigger(policy, tmp_path)
    started = time.monotonic()
    code = _run(
        "--trigger",
        trigger,
        "--policy",
        str(policy),
        *FAST,
        *(arg for kind, path in reports.items() for arg in (f"--{kind}", str(path))),
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert time.monotonic() - started < 40
    document = json.loads(reports["json"].read_text())
    assert validate_report(document) == []
    assert {s["id"]: s["outcome"] for s in document["scenarios"]} == dict.fromkeys(X_IDS, "passed")
    suite = ET.parse(reports["junit"]).getroot().find("testsuite")
    assert suite is not None
    assert suite.get("tests") == str(len(X_IDS))
    lines = [json.loads(line) for line in reports["ndjson"].read_text().splitlines()]
    assert lines[0]["event"] == "run_started"
    assert lines[-1]["event"] == "run_finished"
    assert sum(line["event"] == "scenario_finished" for line in lines) == len(X_IDS)
    assert f"{len(X_IDS)} passed, 0 failed, 0 skipped, 0 errors" in out


def test_the_schedule_classification_retries_4xx_and_skips_retry_after(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schedule = tmp_path / "schedule.toml"
    schedule.write_text(
        "delays = [0, 1]\nmax_attempts = 3\ntimeout = 1\nhonor_retry_after = false\n"
        "[classification]\n"
        'retry = ["1xx", "3xx", "4xx", "5xx", "timeout", "connection"]\nstop = ["410"]\n'
    )
    report = tmp_path / "report.json"
    code = _run(
        "--trigger",
        send_trigger(schedule, tmp_path),
        "--policy",
        str(schedule),
        *FAST,
        *("--select", "sender.unauthorized", "--select", "sender.client-error"),
        *("--select", "sender.stop-after-410", "--select", "sender.retry-after-*"),
        *("--json", str(report)),
    )
    assert code == 0, capsys.readouterr().out
    outcomes = {s["id"]: s for s in json.loads(report.read_text())["scenarios"]}
    assert outcomes["sender.unauthorized"]["outcome"] == "passed"
    assert outcomes["sender.client-error"]["reason"] == "2 attempts"  # retried, then 200
    assert outcomes["sender.stop-after-410"]["reason"] == "1 attempt"
    assert outcomes["sender.retry-after-date"]["outcome"] == "skipped"
    assert "does not honour Retry-After" in outcomes["sender.retry-after-seconds"]["reason"]


def test_an_independent_sender_passes_and_each_seeded_bug_is_caught(
    policy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reports = {name: tmp_path / f"{name}.json" for name in ("honest", "broken")}
    selection = [arg for scenario in AIMED for arg in ("--select", scenario)]
    for name, bugs in (("honest", {}), ("broken", {k: v[0] for k, v in AIMED.items()})):
        monkeypatch.setenv("BROKEN_SENDER_BUGS", json.dumps(bugs))
        code = _run(
            "--trigger", SCRIPT, "--policy", str(policy), *FAST, *selection,
            "--json", str(reports[name]),
        )  # fmt: skip
        assert code == (0 if name == "honest" else 1)
    honest = json.loads(reports["honest"].read_text())["scenarios"]
    assert {s["id"]: s["outcome"] for s in honest} == dict.fromkeys(AIMED, "passed")
    for scenario in json.loads(reports["broken"].read_text())["scenarios"]:
        bug, says = AIMED[scenario["id"]]
        assert scenario["outcome"] == "failed", (bug, scenario)
        observed = _observed(scenario)
        assert says in observed, (bug, observed)
        assert "attempt 1 at +0.000 s" in scenario["failures"][0]["reproduce"]


def test_a_sender_that_bounds_only_its_first_attempt_fails_the_retry_timeout(
    policy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A timeout set on the first request only (a client configured once, then retries sent
    without it): the scenario holds a retry's answer too, so the open-ended wait is seen."""
    code, scenario = _one_bug(
        policy, tmp_path, monkeypatch, "sender.retry-timeout", "no-timeout-on-retries"
    )
    assert code == 1
    assert scenario["outcome"] == "failed"
    observed = _observed(scenario)
    assert "still waiting on attempt 2" in observed
    assert "attempt 1" not in observed.split("still waiting on attempt 2")[0]


def test_a_sender_that_counts_only_5xx_attempts_fails_max_attempts_unanswered(
    policy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reset and a timeout are attempts too: a sender whose budget counts only 5xx answers
    retries an endpoint that never answers for ever."""
    code, scenario = _one_bug(
        policy, tmp_path, monkeypatch, "sender.max-attempts-unanswered", "counts-only-5xx"
    )
    assert code == 1
    assert scenario["outcome"] == "failed"
    observed = _observed(scenario)
    assert "more than max_attempts 3" in observed


def test_a_stripe_style_sender_writing_upper_case_hex_fails_the_signature_check(
    policy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Upper-case hex is the same bytes, and hookproof's own verifier takes it, but Stripe's
    libraries (and GitHub's documented check) compare the lower-case text they compute: every
    delivery would be refused. A must, on every attempt; the same sender in lower case passes."""
    scenario_id = "sender.signature-every-attempt"
    code, honest = _one_bug(policy, tmp_path, monkeypatch, scenario_id, "", scheme="stripe")
    assert (code, honest["outcome"]) == (0, "passed"), honest
    code, scenario = _one_bug(
        policy, tmp_path, monkeypatch, scenario_id, "upper-hex", scheme="stripe"
    )
    assert code == 1
    assert scenario["outcome"] == "failed"
    observed = _observed(scenario)
    assert "its hex signature is upper case" in observed


def test_a_sender_that_does_not_declare_json_fails_a_should(
    policy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sender whose attempts say text/plain: express.raw({type: 'application/json'}) hands
    the documented receivers no body to verify. A convention of the platform (should), named
    per attempt; a charset parameter is the sender's own business."""
    code, scenario = _one_bug(
        policy, tmp_path, monkeypatch, "sender.signature-every-attempt", "text-plain"
    )
    assert code == 0  # a should
    assert scenario["outcome"] == "failed"
    assert [f["severity"] for f in scenario["failures"]] == ["should"]
    observed = scenario["failures"][0]["observed"]
    assert "attempts 1, 2, 3 carried content-type: 'text/plain'" in observed


def test_a_hedged_retry_whose_success_drops_the_held_attempt_is_seen_in_flight(
    policy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hedging sender fires its retry while the first attempt is still held and exits the
    moment the retry gets its 2xx: the held attempt ends milliseconds after the retry came, too
    close for any timing tolerance, but it was seen open when the retry arrived (a should)."""
    code, scenario = _one_bug(
        policy, tmp_path, monkeypatch, "sender.one-in-flight", "hedged-retries"
    )
    assert code == 0  # a should
    assert scenario["outcome"] == "failed", scenario
    observed = _observed(scenario)
    assert "attempt 2 arrived while attempt 1 was still in flight: its connection was open" in (
        observed
    )


def test_the_console_shows_the_attempts_a_failure_names_and_verbose_shows_all(
    policy: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reused timestamp shows up on attempt 3 (attempt 2 came too soon to tell it from the
    timestamp's resolution): the default reproduction is attempts 1 and 3, --verbose all three;
    the sample in docs/check-sender.md is what the console prints."""
    monkeypatch.setenv(
        "BROKEN_SENDER_BUGS", json.dumps({"sender.timestamp-fresh": "reused-timestamp"})
    )
    shown, failure_text = {}, {}
    for verbose in ((), ("--verbose",)):
        code = _run(
            "--trigger", SCRIPT, "--policy", str(policy), *FAST,
            "--select", "sender.timestamp-fresh", *verbose,
        )  # fmt: skip
        assert code == 1
        out = capsys.readouterr().out
        failure_text[bool(verbose)] = out.split("Failures\n", 1)[1].split("\n\n0 passed")[0]
        assert "hookproof: 1 scenario judging the sender" in out
        assert "attempt 3's timestamp is +0 s from attempt 1's" in out
        reproduce = out.split("reproduce:", 1)[1].splitlines()[1:4]
        shown[bool(verbose)] = [line.split(" at +")[0].strip() for line in reproduce]
    assert shown[False] == ["attempt 1", "attempt 3", "(+1 more request: --verbose shows them)"]
    assert shown[True] == ["attempt 1", "attempt 2", "attempt 3"]
    assert _shape(failure_text[False].splitlines()) == _shape(_docs_sample()), "the docs sample"


def _docs_sample() -> list[str]:
    """The sample failure of docs/check-sender.md (the fenced block it opens)."""
    text = DOCS.read_text(encoding="utf-8")
    block = text.split("```\nsender.timestamp-fresh [must]", 1)[1].split("```", 1)[0]
    return ("sender.timestamp-fresh [must]" + block).splitlines()


def _shape(lines: list[str]) -> list[str]:
    """The lines with what changes from run to run (numbers, ids, digests) blotted out."""
    blotted = [re.sub(r"evt_[0-9a-f]+|sha256:[0-9a-f]+|\d+(\.\d+)?", "#", ln) for ln in lines]
    return [ln.rstrip() for ln in blotted if ln.strip()]


def test_a_failing_trigger_is_one_error_line_per_scenario(
    policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run(
        "--trigger", "echo 'platform API said 401' >&2; exit 3", "--policy", str(policy),
        *FAST, "--select", "sender.retry-500", "--select", "sender.retry-503",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1
    for scenario in ("sender.retry-500", "sender.retry-503"):
        line = next(ln for ln in out.splitlines() if f"ERROR   {scenario}" in ln)
        assert "trigger exited with status 3 before any request: platform API said 401" in line
    assert "0 passed, 0 failed, 0 skipped, 2 errors" in out


def test_a_public_urls_password_is_not_in_the_report(
    policy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.json"
    code = _run(
        "--trigger", "exit 3", "--policy", str(policy), *FAST, "--select", "sender.retry-500",
        "--public-url", "https://tunnel:pa55-w0rd-long@hooks.example", "--json", str(report),
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1
    target = json.loads(report.read_text())["target"]
    assert target.startswith("https://tunnel:<redacted>@hooks.example/s/")
    assert "pa55-w0rd-long" not in out + report.read_text()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie awaiting its reaper counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_a_trigger_that_never_sends_errors_and_is_killed(policy: Path, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    settings = SenderCheckSettings(
        secrets=(SECRET,),
        trigger=f"sleep 60 & echo $! >> {shlex.quote(str(pids))}; exit 0",
        policy=str(policy),
        trigger_start=0.5,
        select=("sender.retry-500", "sender.max-attempts"),
    )
    events: list[object] = []
    summary = asyncio.run(run_sender_check(settings, [_Keep(events)], announce=lambda _: None))
    assert summary == Summary(errors=2)
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    reasons = [result.message for result in finished.results]
    assert all("no request arrived at http://127.0.0.1:" in r for r in reasons), reasons
    left = [int(pid) for pid in pids.read_text().split()]
    assert len(left) == 2
    deadline = time.monotonic() + 5
    while any(map(_alive, left)) and time.monotonic() < deadline:
        time.sleep(0.05)  # real-time: waiting for init to reap the killed group
    assert not any(map(_alive, left)), "what the trigger left running was killed with it"


class _Keep:
    def __init__(self, events: list[object]) -> None:
        self.events = events

    def handle(self, event: object) -> None:
        self.events.append(event)


@pytest.mark.parametrize("listen", ["localhost:99999", "127.0.0.1:-1", "127.0.0.1:http"])
def test_a_listen_address_with_no_such_port_is_exit_2(
    listen: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = usage_error_line(
        ["check-sender", "--secret", SECRET, "--trigger", "true", "--listen", listen], capsys
    )
    assert f"--listen {listen!r}" in line


def test_a_nonexistent_trigger_is_exit_2_before_any_scenario(
    policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run("--trigger", "no-such-sender-cli --send", "--policy", str(policy)) == 2
    captured = capsys.readouterr()
    assert "the --trigger command 'no-such-sender-cli' was not found" in captured.err
    assert "sender." not in captured.out


def test_the_policy_file_of_the_docs_loads_and_so_does_its_full_jitter_alternative() -> None:
    text = DOCS.read_text(encoding="utf-8")
    block = text.split("### The policy file\n\n```toml\n", 1)[1].split("```", 1)[0]
    policy = policy_from_mapping(tomllib.loads(block), name="docs")
    assert policy.backoff == FixedSchedule(tuple(timedelta(seconds=s) for s in (0, 1, 2)))
    assert (policy.max_attempts, policy.timeout) == (4, timedelta(seconds=1))
    alternative = re.findall(r"^# ((?:backoff|base|cap) = .*)$", block, flags=re.MULTILINE)
    assert len(alternative) == 3, "the full-jitter alternative, one key a line"
    without_delays = [ln for ln in block.splitlines() if not ln.startswith("delays =")]
    jittered = tomllib.loads("\n".join([*alternative, *without_delays]))
    backoff = policy_from_mapping(jittered, name="docs").backoff
    assert backoff == FullJitter(timedelta(seconds=1), timedelta(seconds=2))


def test_bad_policy_and_selection_are_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("delays = [0, 1]\nmax_atempts = 3\n")
    assert _run("--trigger", "true", "--policy", str(bad)) == 2
    assert "unknown key 'max_atempts'" in capsys.readouterr().err
    assert _run("--trigger", "true", "--policy", "hourly") == 2
    assert "neither a built-in profile" in capsys.readouterr().err
    assert _run("--trigger", "true", "--select", "signature") == 2
    assert "no sender.* (X) scenario" in capsys.readouterr().err


def test_max_time_bounds_the_run(policy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    code = _run(
        "--trigger", "sleep 30", "--policy", str(policy), "--max-time", "1.5",
        "--select", "sender.retry-500", "--select", "sender.retry-503", "--jobs", "1",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1
    assert time.monotonic() - started < 6
    assert "time budget (max_time 1.5 s) ran out" in out


def test_manual_mode_prints_the_url_and_judges_what_arrives(policy: Path) -> None:
    urls: asyncio.Queue[str] = asyncio.Queue()
    settings = SenderCheckSettings(
        secrets=(SECRET,),
        policy=str(policy),
        quiet_period=0.5,
        select=("sender.no-retry-after-2xx",),
        max_time=20,
    )
    verifier = Verifier([Secret(SECRET)])

    async def by_hand() -> None:
        url = (await urls.get()).rsplit(" ", 1)[-1]
        body = b'{"type":"manual.test","data":{}}'
        headers = verifier.sign(body, event_id="evt_manual", timestamp=int(time.time()))
        async with httpx.AsyncClient() as client:
            assert (await client.post(url, content=body, headers=headers)).status_code == 200

    async def both() -> Summary:
        sending = asyncio.create_task(by_hand())
        summary = await run_sender_check(settings, [], announce=urls.put_nowait)
        await sending
        return summary

    assert asyncio.run(both()) == Summary(passed=1)


def test_first_attempt_within_bounds_the_wait_for_a_silent_sender(
    policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    code = _run(
        "--trigger", "exit 0", "--policy", str(policy), "--first-attempt-within", "0.5",
        "--select", "sender.retry-500",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1
    assert "ERROR   sender.retry-500" in out
    assert "no request arrived" in out
    assert time.monotonic() - started < 10  # far below the 10 s default wait
