"""The zoo's WSGI stack: Flask receivers (``flask_receiver/app.py``) verifying with the PyPI
``standardwebhooks`` and ``stripe`` packages, deduplicating in SQLite, served by waitress's
thread pool, checked over real HTTP on loopback.

The documented and correct variants break no ``must`` (except the documented samples' own,
explained failures, pinned below); each broken variant fails the scenarios aimed at its bug, a
``must`` among them; every variant of the app is accounted for. Skipped, saying why, where flask
or waitress is not installed.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.catalogue import CATALOGUE
from conformance.causes import EFFECT_AFTER_ANSWER, group_by_cause
from conformance.model import Harness, Severity
from conformance.results import Outcome, ScenarioResult
from tests.conformance.broken_receivers import PROBE_TOKEN, SECOND_SECRET
from tests.conformance.support import SECRET, broken_guarantees, check_variant, other_schemes_only
from tests.support.processes import ServerProcess, free_port

pytestmark = pytest.mark.subprocess

HERE = Path(__file__).resolve().parent / "flask_receiver"
MAX_BODY = 4096

DOCUMENTED_MUST_FAILURES: dict[str, frozenset[str]] = {
    # standardwebhooks' verify() raises ValueError (a signature entry without a comma),
    # binascii.Error, UnicodeDecodeError (data.decode()) and JSONDecodeError besides
    # WebhookVerificationError; the README sample catches only the latter, so Flask answers 500.
    "std-docs": frozenset(
        {
            "signature.malformed-headers",
            "signature.body-not-utf8",
            "signature.body-not-json",
            "signature.repeated-headers",
        }
    ),
    # Stripe's Flask sample reads request.headers['STRIPE_SIGNATURE']: without the header
    # werkzeug raises KeyError outside the try, and Flask answers 500.
    "stripe-docs": frozenset({"signature.missing-signature"}),
}
"""The ``must`` scenarios the documented samples break, each for a reason of the sample's own."""

FLASK_MUST_FAIL: dict[str, frozenset[str]] = {
    "std-json-reserialised": frozenset({"signature.valid", "signature.raw-bytes"}),
    "stripe-json-reserialised": frozenset({"signature.valid", "signature.raw-bytes"}),
    "std-environ-key": frozenset({"idempotency.distinct-same-body"}),
    "std-get-json-first": frozenset({"signature.body-odd-json"}),
    "std-narrow-except": frozenset(
        {"signature.malformed-headers", "signature.body-not-utf8", "signature.body-not-json"}
    ),
    "std-integrity-after-work": frozenset(
        {"idempotency.sequential-duplicate", "idempotency.late-duplicate"}
    ),
    "std-check-then-insert": frozenset({"idempotency.concurrent-duplicates"}),
    "std-thread-ack": frozenset({"response.ack-after-commit"}),
    "std-first-secret": frozenset({"signature.each-secret"}),
    "stripe-first-secret": frozenset({"signature.each-secret"}),
    "std-latin1": frozenset({"signature.utf8-body"}),
    "std-abort-unknown": frozenset({"signature.valid"}),
    "std-mark-first": frozenset({"idempotency.staggered-duplicates"}),
    "stripe-tolerance": frozenset({"clock.past-outside", "clock.replay-after-window"}),
    "stripe-object-key": frozenset({"idempotency.distinct-same-body"}),
    "std-queued-every-copy": frozenset(
        {"idempotency.sequential-duplicate", "idempotency.concurrent-duplicates"}
    ),
}
"""For each broken Flask variant (the table atop app.py), the scenarios that must fail."""

NOT_CAUGHT_AT_MUST: dict[str, str] = {
    "std-form-consumed": "request.form only consumes form-encoded bodies; every delivery is "
    "application/json, so request.stream still holds the bytes and nothing fails",
    "std-no-max-content": "size.over-limit fails, but a missing body limit is a should",
    "std-locked-500": "timing: a locked file is a 500 only when the lock meets a copy's claim; "
    "met by the commit it is answered 503 (retry later). idempotency.concurrent-duplicates "
    "catches it in some runs, not reliably",
    "std-payload-jsonb": "signature.nul-escape fails (a 500 on every retry of a genuine event "
    "whose JSON holds \\u0000), but such an event is rare and may be refused: a should",
    "std-queued-in-memory": "checked with --settle, as the queued variants are, a black box "
    "cannot tell a queue in memory from a durable one: the effect is lost only when the process "
    "dies between the answer and the worker (without --settle, ack-after-commit fails it, and "
    "std-queued with it)",
}
"""Broken variants no ``must`` scenario catches, and why."""

CORRECT = ("std-correct", "stripe-correct", "std-queued")
"""Careful variants; ``std-queued`` answers once the event is stored with its job and applies the
effect afterwards from that durable queue, as Stripe's and Svix's docs recommend."""

QUEUED_SETTLE = 1.0
"""``--settle`` for the queued variants: checked as a platform that allows a durable queue."""


def _unavailable() -> str | None:
    for module in ("flask", "waitress", "standardwebhooks", "stripe"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install flask waitress standardwebhooks stripe)"
    return None


def _app_variants() -> tuple[str, ...]:
    """The variants the app serves, read from its module (which imports flask)."""
    sys.path.insert(0, str(HERE))
    try:
        import app  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(HERE))
    return tuple(app.VARIANTS)


@pytest.fixture(scope="module")
def flask_server() -> Iterator[str]:
    reason = _unavailable()
    if reason is not None:
        pytest.skip(reason)
    port = free_port()
    table = f"flaskzoo_events_{uuid.uuid4().hex[:12]}"
    dsn = os.environ.get("HOOKPROOF_TEST_POSTGRES_DSN", "")
    with tempfile.TemporaryDirectory() as data_dir:
        env = {
            "FLASKZOO_POSTGRES_DSN": dsn,
            "FLASKZOO_POSTGRES_TABLE": table,
            "FLASKZOO_SECRETS": f"{SECRET} {SECOND_SECRET}",
            "FLASKZOO_PROBE_TOKEN": PROBE_TOKEN,
            "FLASKZOO_DATA_DIR": data_dir,
            "FLASKZOO_MAX_BODY": str(MAX_BODY),
            "FLASKZOO_PORT": str(port),
        }
        base = f"http://127.0.0.1:{port}"
        ready = f"{base}/std-correct/_hookproof/events/x"
        with ServerProcess.start(
            [sys.executable, "app.py"], env=env, cwd=HERE, ready_url=ready
        ) as server:
            yield base
            server.close()
    if dsn:
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")


def _check(base: str, variant: str, **overrides: object) -> dict[str, ScenarioResult]:
    documented = variant.endswith("-docs")
    if variant.startswith("std-queued"):
        overrides.setdefault("settle", QUEUED_SETTLE)
    return check_variant(
        f"{base}/{variant}",
        secrets=(SECRET,) if documented else (SECRET, SECOND_SECRET),
        probe_token=PROBE_TOKEN,
        max_body=MAX_BODY,
        scheme=_scheme(variant),
        concurrency=8,
        **overrides,
    )


def _scheme(variant: str) -> str:
    return "stripe" if variant.startswith("stripe-") else "standard"


@pytest.mark.parametrize("variant", CORRECT)
def test_a_careful_flask_receiver_breaks_no_guarantee(flask_server: str, variant: str) -> None:
    results = _check(flask_server, variant)
    assert set(results) == {s.id for s in CATALOGUE.tagged(Harness.C)}
    assert broken_guarantees(results) == {}
    assert all(r.outcome is not Outcome.FAILED for r in results.values())
    skipped = {sid for sid, r in results.items() if r.outcome is Outcome.SKIPPED}
    assert skipped == other_schemes_only(_scheme(variant))


@pytest.mark.parametrize(("variant", "explained"), sorted(DOCUMENTED_MUST_FAILURES.items()))
def test_a_documented_flask_sample_breaks_only_its_explained_musts(
    flask_server: str, variant: str, explained: frozenset[str]
) -> None:
    """The samples as documented (plus a dedupe and the probe): their only ``must`` failures
    are the 500s their own narrow ``except`` lets through, listed above."""
    results = _check(flask_server, variant)
    assert set(broken_guarantees(results)) == explained
    for scenario_id in explained:
        assert "500" in results[scenario_id].failures[0].observed


@pytest.mark.parametrize(("bug", "must_fail"), sorted(FLASK_MUST_FAIL.items()))
def test_a_broken_flask_receiver_fails_the_scenarios_aimed_at_its_bug(
    flask_server: str, bug: str, must_fail: frozenset[str]
) -> None:
    results = _check(flask_server, bug, select=tuple(sorted(must_fail)))
    failed = {sid for sid, r in results.items() if r.outcome is Outcome.FAILED}
    assert must_fail <= failed, bug
    assert Severity.MUST in {CATALOGUE.get(sid).severity for sid in must_fail}
    for scenario_id in must_fail:
        failure = results[scenario_id].failures[0]
        assert failure.expected
        assert failure.observed
        assert SECRET not in failure.reproduce + failure.observed


def test_a_queued_receiver_needs_settle_and_then_its_late_effects_are_read(
    flask_server: str,
) -> None:
    """Its probe says committed with no effect at the 2xx. By default (the probe contract) that
    is a 2xx before the commit, and the failure says the effect showed later; with --settle the
    effect is read when it shows, and the results say they waited."""
    strict = _check(flask_server, "std-queued", settle=0)
    failure = strict["response.ack-after-commit"].failures[0]
    assert "committed, 0 effect(s)" in failure.observed
    assert "ms later: it is applied after the answer" in failure.observed
    # every failure of the run is that one cause, and the report leads with it
    failed = {sid for sid, r in strict.items() if r.outcome is Outcome.FAILED}
    assert len(failed) >= 10
    leading = group_by_cause(strict.values())[0]
    assert (leading.key, set(leading.scenarios)) == (EFFECT_AFTER_ANSWER, failed)
    selected = ("response.ack-after-commit", "idempotency.sequential-duplicate")
    results = _check(flask_server, "std-queued", select=selected)
    assert {sid: r.outcome for sid, r in results.items()} == dict.fromkeys(selected, Outcome.PASSED)
    assert "late second effect" in results["idempotency.sequential-duplicate"].message


def test_a_missing_body_limit_fails_only_the_should(flask_server: str) -> None:
    results = _check(flask_server, "std-no-max-content", select=("size.over-limit",))
    assert results["size.over-limit"].outcome is Outcome.FAILED
    assert broken_guarantees(results) == {}


@pytest.mark.postgres
def test_a_receiver_keeping_payloads_in_jsonb_fails_only_the_nul_escape_should(
    flask_server: str, postgres_dsn: str
) -> None:
    results = _check(flask_server, "std-payload-jsonb")
    assert broken_guarantees(results) == {}
    failed = {sid for sid, r in results.items() if r.outcome is Outcome.FAILED}
    assert failed == {"signature.nul-escape"}
    assert CATALOGUE.get("signature.nul-escape").severity is Severity.SHOULD
    assert "500" in results["signature.nul-escape"].failures[0].observed


def test_every_flask_variant_is_accounted_for() -> None:
    reason = _unavailable()
    if reason is not None:
        pytest.skip(reason)
    accounted = set(CORRECT) | set(DOCUMENTED_MUST_FAILURES) | set(FLASK_MUST_FAIL)
    accounted |= set(NOT_CAUGHT_AT_MUST)
    assert set(_app_variants()) == accounted
    assert not set(FLASK_MUST_FAIL) & set(NOT_CAUGHT_AT_MUST)
