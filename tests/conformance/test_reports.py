"""Reports that say what to fix: failures grouped by cause, one reproduction per failure (all of
them with --verbose), a curl that reproduces the bytes, seed and options in JSON and JUnit, the
NDJSON event stream, counted nouns, NO_COLOR, and the whsec_ warning before a run."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from starlette.responses import PlainTextResponse, RedirectResponse

from conformance.catalogue import CATALOGUE
from conformance.causes import group_by_cause
from conformance.cli import main
from conformance.config import CheckSettings
from conformance.events import RunFinished, RunStarted
from conformance.harnesses.signed_requests import WireRequest
from conformance.model import Severity
from conformance.reporters import ConsoleReporter, junit_document
from conformance.reporters.text import counted, describe_result
from conformance.results import Failure, Outcome, ScenarioResult, Summary
from conformance.shell import LONG_RUN, body_producer, curl_command
from receiver.server import running_server
from tests.conformance.broken_receivers import PROBE_TOKEN, SECOND_SECRET, plain_receiver
from tests.conformance.report_schema import validate_report
from tests.conformance.support import SECRET, check_variant

BODIES = [
    b'{"a": 1}',
    b'{\n  "multi": "line",\n  "quote": "it\'s"\n}\n',
    b"\x00\xff\xfe binary \r\n 100% \\ 'q' $HOME `x`",
    '{"unicode": "caf\u00e9 \u2603"}'.encode(),
    b'{"padding":"' + b"x" * 300_000 + b'"}',  # a size scenario's body: one long run
    b"\x00" * 300 + b"\xff" * 1000 + b"%" * 256 + b"'\\\n-" * 3,  # runs of awkward bytes
]


class _Capture(BaseHTTPRequestHandler):
    bodies: ClassVar[list[tuple[bytes, str]]] = []

    def do_POST(self) -> None:
        length = int(self.headers["content-length"])
        self.bodies.append((self.rfile.read(length), self.headers.get("x-odd", "")))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def capture() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Capture.bodies = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("body", BODIES)
def test_the_curl_reproduction_sends_the_exact_bytes(capture: str, body: bytes) -> None:
    request = WireRequest(capture, (("x-odd", "tab\there é".encode("latin-1")),), body)
    command = request.curl(signature_header=None)
    assert "\n" not in command  # one line: it survives copy and paste
    assert len(command) < 400  # long runs are written by head | tr, not spelled out
    if shutil.which("curl") is None or shutil.which("bash") is None:
        pytest.skip("curl or bash is not installed: the printf part is checked below")
    subprocess.run(["bash", "-c", command], check=True, capture_output=True, timeout=20)
    assert _Capture.bodies == [(body, "tab\there é")]


@pytest.mark.parametrize("body", BODIES)
def test_the_body_part_of_a_reproduction_prints_the_exact_bytes_in_sh(body: bytes) -> None:
    command = curl_command("POST", "http://127.0.0.1:9/", [], body)
    if command.endswith("--data-binary @-"):
        producer = command.split(" | curl ", 1)[0]
        out = subprocess.run(["sh", "-c", producer], check=True, capture_output=True, timeout=20)
        assert out.stdout == body
    else:
        assert command.endswith("--data-binary " + __import__("shlex").quote(body.decode()))


_RUNNY = st.lists(
    st.one_of(
        st.binary(max_size=40),
        st.tuples(st.integers(0, 255), st.integers(LONG_RUN - 2, 700)).map(
            lambda run: bytes([run[0]]) * run[1]
        ),
    ),
    max_size=5,
).map(b"".join)


@settings(max_examples=40, deadline=None)
@given(_RUNNY)
@example(b"-\x00")  # a format starting with '-' is an option to dash's printf
@example(b"-" * 100 + b"x")
def test_a_body_producer_writes_the_exact_bytes_whatever_its_runs(body: bytes) -> None:
    out = subprocess.run(
        ["sh", "-c", body_producer(body)], check=True, capture_output=True, timeout=20
    )
    assert out.stdout == body


def _result(sid: str, *failures: Failure, outcome: Outcome = Outcome.FAILED) -> ScenarioResult:
    return ScenarioResult(CATALOGUE.get(sid), outcome, "probe", 0.01, failures)


def _failure(severity: Severity = Severity.MUST, cause: str = "", repro: str = "") -> Failure:
    return Failure("expected thing", "observed thing", repro, severity, cause)


def test_failures_are_grouped_by_their_likely_cause_most_first() -> None:
    results = [
        _result("idempotency.sequential-duplicate", _failure()),
        _result("idempotency.redrive-duplicate", _failure()),
        _result("idempotency.double-redrive", _failure()),
        _result("signature.tampered-body", _failure(Severity.SHOULD, "convention")),
        _result("signature.wrong-secret", _failure(Severity.SHOULD, "convention")),
        _result("clock.past-inside", _failure()),
        _result("signature.valid", outcome=Outcome.PASSED),
    ]
    causes = group_by_cause(results)
    # a broken guarantee before a convention, however many scenarios the convention counts
    assert [c.key for c in causes] == ["dedupe", "tolerance", "convention"]
    assert causes[0].line.startswith("deduplicate on the event id (webhook-id;")
    assert causes[0].line.endswith(" — 3 scenarios")
    assert causes[1].line.endswith(" — 1 scenario")


def test_effects_applied_after_the_answer_lead_however_few() -> None:
    results = [
        _result("idempotency.sequential-duplicate", _failure()),
        _result("idempotency.late-duplicate", _failure()),
        _result("response.ack-after-commit", _failure(cause="effect-after-answer")),
    ]
    causes = group_by_cause(results)
    assert [c.key for c in causes] == ["effect-after-answer", "dedupe"]
    assert "--settle" in causes[0].fix


def test_503s_fold_into_an_acknowledgement_in_flight_and_lead_without_one() -> None:
    """A 503 to a copy is a gateway shedding load, unless the run shows the receiver answering
    2xx to events still in flight: then it is that receiver's own in-flight answer."""
    unavailable = _result("idempotency.sequential-duplicate", _failure(cause="unavailable"))
    early = _result("signature.valid", _failure(cause="acknowledged-in-flight"))
    mixed = _result(
        "signature.repeated-headers", _failure(), _failure(cause="acknowledged-in-flight")
    )
    folded = group_by_cause([_result("clock.past-inside", _failure()), unavailable, early, mixed])
    assert [(c.key, len(c.scenarios)) for c in folded] == [
        ("acknowledged-in-flight", 3),
        ("tolerance", 1),
    ]
    alone = group_by_cause([_result("clock.past-inside", _failure()), unavailable])
    assert [c.key for c in alone] == ["unavailable", "tolerance"]


def test_a_dedupe_that_forgets_is_a_retention_bug_unless_it_never_dedupes() -> None:
    forgets = [
        _result("idempotency.late-duplicate", _failure()),
        _result("idempotency.duplicate-after-other-events", _failure()),
        _result("idempotency.sequential-duplicate", outcome=Outcome.PASSED),
    ]
    (cause,) = group_by_cause(forgets)
    assert cause.key == "retention"
    assert cause.line.startswith("keep each event id's dedupe record durably")
    assert cause.line.endswith(" — 2 scenarios")
    never = [*forgets[:2], _result("idempotency.sequential-duplicate", _failure())]
    assert [(c.key, len(c.scenarios)) for c in group_by_cause(never)] == [("dedupe", 3)]


FOLDED = (
    "signature.valid",
    "signature.rotation",
    "signature.each-secret",
    "idempotency.sequential-duplicate",
    "signature.tampered-body",
)


def test_a_receiver_that_refuses_every_authentic_delivery_is_told_that_first() -> None:
    """A wrong secret (or scheme, path, event type) fails most of the catalogue; the report
    leads with that one cause, quoting the answer, instead of a dozen fixes of bugs it has not
    got. A refusal the receiver got right (the tampered body) is not folded into it."""
    with running_server(plain_receiver(SECOND_SECRET)) as base:
        results = check_variant(
            base, secrets=(SECRET,), probe_token=PROBE_TOKEN, max_body=4096, select=FOLDED
        )
    causes = group_by_cause(results.values())
    first = causes[0]
    assert first.key == "refused-authentic"
    assert set(first.scenarios) == set(FOLDED) - {"signature.tampered-body"}
    assert "--secret" in first.fix
    assert "answered 401" in first.fix
    assert results["signature.tampered-body"].outcome is Outcome.PASSED


def test_a_receiver_that_acknowledges_before_it_commits_is_told_that_first() -> None:
    """A receiver that answers 2xx before committing (a background task) fails most of the
    catalogue, and its 503s to the copies that follow look like a gateway shedding load. The
    probe, read after the 2xx, still shows the event in flight: the report leads with that one
    cause and folds the 503s into it, instead of fifteen fixes of bugs the receiver has not got."""
    receiver = plain_receiver(SECRET, bugs=frozenset({"ack-before-commit"}))
    with running_server(receiver) as base:
        results = check_variant(base, secrets=(SECRET,), probe_token=PROBE_TOKEN, max_body=4096)
    failed = {sid for sid, r in results.items() if r.outcome is Outcome.FAILED}
    first, *rest = group_by_cause(results.values())
    assert first.key == "acknowledged-in-flight"
    assert {"signature.valid", "response.ack-after-commit"} <= set(first.scenarios)
    assert len(first.scenarios) >= 10
    assert "unavailable" not in {cause.key for cause in rest}
    valid = results["signature.valid"].failures[0]
    assert "in_flight" in valid.observed
    assert "after a 2xx: acknowledged before it was committed" in valid.observed
    assert set(first.scenarios) <= failed


def test_a_receiver_that_acknowledges_the_generic_event_and_drops_it_is_told_that_first() -> None:
    """Stripe's sample answers an event type it has no handler for with success and does
    nothing: every scenario that expects an effect fails. The report leads with that one cause
    (the probe showed no effect after the 2xx), not with a dozen bugs the receiver has not got;
    a refusal it got right passes, and the console lists the folded scenarios one line each."""
    receiver = plain_receiver(SECRET, bugs=frozenset({"ignores-generic-event"}))
    with running_server(receiver) as base:
        results = check_variant(base, secrets=(SECRET,), probe_token=PROBE_TOKEN, max_body=4096)
    first, *rest = group_by_cause(results.values())
    assert first.key == "acknowledged-unapplied"
    assert "--event-template" in first.fix
    assert {"signature.valid", "signature.rotation", "clock.past-inside"} <= set(first.scenarios)
    assert len(first.scenarios) >= 15
    assert all(len(cause.scenarios) <= 2 for cause in rest), rest
    assert results["signature.tampered-body"].outcome is Outcome.PASSED
    started, finished = _finished(*results.values())
    stream = io.StringIO()
    reporter = ConsoleReporter(stream, colour=False)
    reporter.handle(started)
    reporter.handle(finished)
    out = stream.getvalue()
    assert "Failed by the same cause (--verbose shows each):" in out
    assert "  signature.rotation [must] — " in out


def test_bad_input_answered_as_a_duplicate_points_at_the_id_recorded_before_verifying() -> None:
    """A receiver that records each webhook-id before verifying answers the second of two
    truncated (or wrong-length) copies "duplicate", 200: the fix is the order of its steps, not
    how it compares signatures or parses headers."""
    receiver = plain_receiver(SECRET, bugs=frozenset({"seen-before-verify"}))
    aimed = ("signature.truncated-signature", "signature.wrong-length-entry")
    with running_server(receiver) as base:
        results = check_variant(
            base, secrets=(SECRET,), probe_token=PROBE_TOKEN, max_body=4096, select=aimed
        )
    (cause,) = group_by_cause(results.values())
    assert (cause.key, set(cause.scenarios)) == ("verify-first", set(aimed))
    assert "before recording the event id" in cause.fix


def test_a_refused_second_secret_keeps_its_own_cause_when_the_plainest_delivery_passes() -> None:
    """Only when the plainest delivery is refused do other refusals fold into that cause: a
    receiver that tries only its first secret is told about rotation, for every scenario whose
    delivery signed with the second secret it refused."""
    receiver = plain_receiver((SECRET, SECOND_SECRET), bugs=frozenset({"only-first-secret"}))
    with running_server(receiver) as base:
        results = check_variant(
            base, secrets=(SECRET, SECOND_SECRET), probe_token=PROBE_TOKEN, max_body=4096
        )
    assert results["signature.valid"].outcome is Outcome.PASSED
    failed = results["signature.each-secret"]
    assert failed.outcome is Outcome.FAILED
    assert any(f.cause == "refused-other-secret" for f in failed.failures)  # marked, not folded
    keys = {c.key: c.scenarios for c in group_by_cause(results.values())}
    assert "refused-authentic" not in keys
    refused_other = {
        sid
        for sid, result in results.items()
        if any(f.cause == "refused-other-secret" for f in result.failures)
    }
    assert len(refused_other) >= 2  # each-secret, and one delivery signed with the second
    assert refused_other <= set(keys["signature-list"])
    assert set(keys) == {"signature-list"}, keys


def test_a_should_only_failure_does_not_fail_the_run() -> None:
    should = _result("signature.tampered-body", _failure(Severity.SHOULD, "convention"))
    must = _result("idempotency.sequential-duplicate", _failure())
    assert should.severity is Severity.SHOULD
    assert Summary.of([should]).ok
    summary = Summary.of([should, must])
    assert (summary.failed, summary.must_failed, summary.should_failed) == (2, 1, 1)
    assert not summary.ok


def _finished(*results: ScenarioResult) -> tuple[RunStarted, RunFinished]:
    started = RunStarted(
        "http://127.0.0.1:9/webhooks",
        "standard",
        tuple(r.scenario for r in results),
        True,
        42,
        {"timeout": 5.0, "answers": {}},
    )
    return started, RunFinished(tuple(results), Summary.of(results), 0.5)


def test_the_console_shows_one_reproduction_unless_verbose_and_pluralises() -> None:
    repro = "curl -sS one\ncurl -sS two\ncurl -sS three"
    started, finished = _finished(
        _result("idempotency.sequential-duplicate", _failure(repro=repro))
    )
    for verbose, shown in ((False, 1), (True, 3)):
        stream = io.StringIO()
        reporter = ConsoleReporter(stream, colour=False, verbose=verbose)
        reporter.handle(started)
        reporter.handle(finished)
        out = stream.getvalue()
        assert out.count("curl -sS ") == shown
        assert ("+2 more requests: --verbose shows them" in out) is (not verbose)
        assert "hookproof: 1 scenario against" in out
        assert "What to fix" in out
        assert "— 1 scenario: idempotency.sequential-duplicate" in out
        assert "1 failed (1 must, 0 should)" in out
        assert "0 errors" in out
        assert "\x1b[" not in out


def test_failures_folded_into_a_refused_plainest_delivery_are_one_line_unless_verbose() -> None:
    refused = "401 in 2 ms: no signature matches"
    plainest = Failure("2xx", refused, "curl -sS plain", Severity.MUST, "refused-authentic")
    started, finished = _finished(
        _result("signature.valid", plainest),
        _result("idempotency.sequential-duplicate", replace(plainest, reproduce="curl -sS dup")),
        _result("clock.past-inside", _failure(repro="curl -sS clock")),  # a cause of its own
    )
    for verbose in (False, True):
        stream = io.StringIO()
        reporter = ConsoleReporter(stream, colour=False, verbose=verbose)
        reporter.handle(started)
        reporter.handle(finished)
        out = stream.getvalue()
        assert "curl -sS plain" in out
        assert "curl -sS clock" in out
        assert ("curl -sS dup" in out) is verbose
        folded = "  idempotency.sequential-duplicate [must] — Sequential duplicate"
        assert (folded in out) is not verbose
        assert out.index("What to fix") < out.index("curl -sS plain")


def test_without_verbose_the_console_shows_the_lines_a_failure_names_as_evidence() -> None:
    """A sender failure's reproduction is its whole timeline; the attempts it names (here the
    first and the third of four) are what the console shows by default."""
    repro = "attempt 1 at +0.000 s\nattempt 2 at +1.0 s\nattempt 3 at +2.5 s\nattempt 4 at +4 s"
    failure = Failure("expected thing", "observed thing", repro, Severity.MUST, evidence=(0, 2))
    text = describe_result(_result("idempotency.sequential-duplicate", failure), verbose=False)
    assert [ln.strip() for ln in text.splitlines() if ln.startswith("    ")] == [
        "attempt 1 at +0.000 s",
        "attempt 3 at +2.5 s",
        "(+2 more requests: --verbose shows them)",
    ]
    assert text.count("attempt ") == 2
    assert (
        describe_result(_result("idempotency.sequential-duplicate", failure)).count("attempt ") == 4
    )  # verbose (JUnit, pytest): every line


def test_no_color_gives_plain_text_even_when_colour_is_not_forced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    stream = io.StringIO()
    stream.isatty = lambda: True  # type: ignore[method-assign]
    reporter = ConsoleReporter(stream)
    started, finished = _finished(_result("signature.valid", _failure()))
    reporter.handle(started)
    reporter.handle(finished)
    assert "\x1b[" not in stream.getvalue()


def test_junit_carries_the_seed_the_options_and_the_graded_severity() -> None:
    started, finished = _finished(
        _result("signature.tampered-body", _failure(Severity.SHOULD, "convention"))
    )
    root = junit_document(started.target, finished, started).getroot()
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert properties["seed"] == "42"
    assert properties["option.timeout"] == "5.0"
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None
    assert failure.get("type") == "should"


def test_counted() -> None:
    assert [counted(n, "scenario") for n in (0, 1, 2)] == [
        "0 scenarios",
        "1 scenario",
        "2 scenarios",
    ]


@pytest.fixture(scope="module")
def no_dedupe() -> Iterator[str]:
    with running_server(plain_receiver(SECRET, bugs=frozenset({"no-dedupe"}))) as base:
        yield base


def test_ndjson_json_and_junit_of_a_real_run(
    no_dedupe: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = {kind: tmp_path / f"report.{kind}" for kind in ("json", "xml", "ndjson")}
    code = main(
        [
            "check",
            f"{no_dedupe}/webhooks",
            "--secret",
            SECRET,
            "--probe",
            f"{no_dedupe}/_hookproof/events",
            "--probe-token",
            PROBE_TOKEN,
            "--select",
            "idempotency.sequential-duplicate",
            "--select",
            "signature.valid",
            "--select",
            "signature.missing-id",
            "--seed",
            "5",
            "--json",
            str(paths["json"]),
            "--junit",
            str(paths["xml"]),
            "--ndjson",
            str(paths["ndjson"]),
        ]
    )
    assert code == 1
    capsys.readouterr()
    lines = [json.loads(line) for line in paths["ndjson"].read_text().splitlines()]
    kinds = [line["event"] for line in lines]
    assert kinds[0] == "run_started"
    assert kinds[-1] == "run_finished"
    assert kinds.count("scenario_finished") == 3
    assert lines[0]["seed"] == 5
    assert lines[0]["options"]["select"] == [
        "idempotency.sequential-duplicate",
        "signature.valid",
        "signature.missing-id",
    ]
    document = json.loads(paths["json"].read_text())
    assert validate_report(document) == []
    assert document["seed"] == 5
    assert document["options"]["timeout"] == 5.0
    assert document["causes"][0]["cause"] == "dedupe"
    assert PROBE_TOKEN not in paths["ndjson"].read_text()
    ET.parse(paths["xml"])


def test_a_secret_without_whsec_is_one_warning_before_the_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = CheckSettings(url="http://x/webhooks", secrets=("c2VjcmV0", SECRET))
    assert len(settings.warnings()) == 1
    assert "secret #1 does not start with 'whsec_'" in settings.warnings()[0]
    short = CheckSettings(url="http://x/webhooks", secrets=(SECRET, "whsec_c2VjcmV0"))
    (warning,) = short.warnings()  # a key cut short in a copy and paste
    assert warning.startswith("secret #2 holds a key of 6 bytes: the secrets platforms mint")
    assert CheckSettings(url="http://x", secrets=("raw",), scheme="github").warnings() == []
    code = main(["check", "http://127.0.0.1:9/webhooks", "--secret", "c2VjcmV0"])
    err = capsys.readouterr().err
    assert code == 2  # nothing listens there
    assert err.count("warning:") == 1
    assert err.index("warning:") < err.index("error:")


def test_no_title_or_help_names_a_source_document_instead_of_what_it_checks() -> None:
    import re

    import click

    from conformance.cli import COMMANDS, cli

    source = re.compile(r"\bseed \d{3}\b", re.IGNORECASE)
    texts = [
        text
        for scenario in CATALOGUE
        for text in (
            scenario.title,
            scenario.guarantee,
            *(e.says for e in scenario.expectations),
        )
    ]
    context = click.Context(cli)
    for name in COMMANDS:
        command = cli.get_command(context, name)
        assert command is not None
        texts.append(command.get_help(click.Context(command, info_name=name)))
    assert [t for t in texts if source.search(t)] == []


def _fix_bullets(console: str) -> list[str]:
    """The "What to fix" lines of a console report, one per cause."""
    fixes = console.split("What to fix", 1)[1].split("Failures", 1)[0]
    return [line for line in fixes.splitlines() if line.strip().startswith("- ")]


async def _redirecting_app(scope: Any, receive: Any, send: Any) -> None:
    """An endpoint moved to https://, as a proxy in front of it answers: 308 to every request."""
    if scope["type"] == "http":
        moved = RedirectResponse("https://partner.example/webhooks", status_code=308)
        await moved(scope, receive, send)


def test_an_endpoint_that_redirects_is_told_that_once_with_its_location(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No webhook sender follows a redirect, so every scenario fails for that one reason: the
    report says so in one cause quoting the Location, not as a list of parsing, clock and
    signature bugs the receiver may not have."""
    picked = ["signature.valid", "signature.missing-id", "clock.past-outside"]
    picked += ["signature.tampered-body", "idempotency.sequential-duplicate"]
    with running_server(_redirecting_app) as base:
        argv = ["check", f"{base}/webhooks", "--secret", SECRET]
        code = main([*argv, *(arg for sid in picked for arg in ("--select", sid))])
    out = capsys.readouterr().out
    assert code == 1
    bullets = _fix_bullets(out)
    assert len(bullets) == 1, bullets
    assert "never follow a redirect" in bullets[0]
    assert "308" in bullets[0]
    assert "Location: https://partner.example/webhooks" in bullets[0]
    assert f"— {len(picked)} scenarios" in bullets[0]


class _Throttled:
    """A gateway's rate limit in front of a correct receiver: every third webhook gets ``status``
    (429, or 503 as nginx's ``limit_req`` answers by default)."""

    def __init__(self, app: Any, status: int) -> None:
        self.app, self.status, self.posts = app, status, 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            self.posts += 1
            if self.posts % 3 == 0:
                page = PlainTextResponse("<html>busy</html>", status_code=self.status)
                await page(scope, receive, send)
                return
        await self.app(scope, receive, send)


def test_a_throttling_gateway_is_told_once_with_the_rate_limit_to_use(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A correct receiver behind a rate limit fails wherever a 429 lands; the report says it
    was throttled and how to run under the limit, not a dozen bugs the receiver has not got."""
    with running_server(_Throttled(plain_receiver(SECRET), 429)) as base:
        argv = ["check", f"{base}/webhooks", "--secret", SECRET, "--select", "signature"]
        code = main(argv)
    out = capsys.readouterr().out
    assert code == 1
    bullets = _fix_bullets(out)
    assert len(bullets) == 1, bullets
    assert "throttled the run with 429" in bullets[0]
    assert "--rate-limit" in bullets[0]


def test_a_gateway_shedding_load_with_503_leads_the_report(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """503 to deliveries the receiver must accept (nginx's limit_req default, or a store that
    is away) leads the report; a 503 to bad input keeps its own cause (a receiver may answer
    junk 503 on purpose, which is a bug of its own), below it."""
    with running_server(_Throttled(plain_receiver(SECRET), 503)) as base:
        code = main(["check", f"{base}/webhooks", "--secret", SECRET, "--select", "signature"])
    out = capsys.readouterr().out
    assert code == 1
    bullets = _fix_bullets(out)
    assert "answered 503 to deliveries it must accept" in bullets[0]
    assert "--rate-limit" in bullets[0]
    assert not any("answered 503 to deliveries" in b for b in bullets[1:])
