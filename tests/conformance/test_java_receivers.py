"""The zoo's third stack: receivers written in Java 17 with the JDK alone (``HttpServer``,
``javax.crypto.Mac``, ``java.util.concurrent``; ``java_receiver/WebhookZoo.java``), checked over
real HTTP on loopback.

They were written from the Standard Webhooks spec, not from the catalogue, so their verdicts
measure hookproof on code it was not shaped by. The correct variant breaks no ``must``; each
broken variant fails the scenarios aimed at its bug (a real failure, not a refusal-code
convention), a ``must`` among them unless the bug is only a hardening. One ``java`` process
serves every variant, each on a path of its own. Skipped, saying why, where no JDK 17 is
installed.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.answers import resolve_answers
from conformance.catalogue import CATALOGUE
from conformance.judging import CONVENTION
from conformance.model import Harness, Severity
from conformance.results import Outcome, ScenarioResult
from tests.conformance.support import (
    SECRET,
    broken_guarantees,
    check_zoo_variant,
    jdk_unavailable,
    other_schemes_only,
    zoo_env,
)
from tests.support.processes import ServerProcess, free_port

pytestmark = pytest.mark.subprocess

SOURCE = Path(__file__).resolve().parent / "java_receiver" / "WebhookZoo.java"
MAX_BODY = 4096
STORE_WRITE_MS = 50
"""The simulated durable write: an ack before the commit is visible for this long."""
SHORT_TTL_PATIENCE = 2.5
"""Longer than the 2 s the short-ttl-dedupe variant keeps a dedupe record."""

JAVA_MUST_FAIL: dict[str, frozenset[str]] = {
    "platform-charset": frozenset({"signature.utf8-body"}),
    "empty-body-500": frozenset({"signature.body-not-json"}),
    "tenant-cast": frozenset({"signature.body-odd-json"}),
    "reserialize": frozenset({"signature.raw-bytes"}),
    "b64-throws": frozenset({"signature.malformed-headers", "signature.garbled-then-genuine"}),
    "first-entry-only": frozenset(
        {"signature.list-positions", "signature.rotation", "signature.unknown-version"}
    ),
    "no-version-check": frozenset({"signature.malformed-headers"}),
    "parseint-ts": frozenset({"signature.malformed-headers"}),
    "millis-tolerance": frozenset(
        {"clock.past-outside", "clock.replay-after-window", "clock.stale-then-genuine"}
    ),
    "no-abs": frozenset({"clock.future-outside", "clock.far-future"}),
    "unsigned-accepted": frozenset({"signature.missing-signature"}),
    "first-secret-only": frozenset({"signature.each-secret"}),
    "catch-all-200": frozenset(
        {
            "signature.tampered-body",
            "signature.wrong-secret",
            "signature.missing-signature",
            "signature.forged-then-genuine",
        }
    ),
    "no-body-limit": frozenset({"size.over-limit"}),
    "body-hash-dedupe": frozenset({"idempotency.distinct-same-body"}),
    "claim-before-verify": frozenset(
        {"signature.forged-then-genuine", "signature.tampered-then-genuine"}
    ),
    "race-dedupe": frozenset(
        {"idempotency.concurrent-duplicates", "idempotency.staggered-duplicates"}
    ),
    "ack-before-commit": frozenset(
        {"response.ack-after-commit", "idempotency.sequential-duplicate"}
    ),
    "async-ack": frozenset({"response.ack-after-commit"}),
    "dup-500": frozenset({"idempotency.sequential-duplicate", "idempotency.late-duplicate"}),
    "short-ttl-dedupe": frozenset({"idempotency.late-duplicate"}),
}
"""For each broken Java variant (``BUGS`` in WebhookZoo.java), the scenarios that must fail."""

HARDENING_ONLY = frozenset({"no-abs", "no-body-limit"})
"""Bugs whose scenarios are ``should``: a future timestamp and an oversized body."""

NOT_CAUGHT: dict[str, str] = {
    "first-header-only": "it reads the first of repeated headers for verifying and deduplicating "
    "alike: no guarantee is broken (signature.repeated-headers passes)",
}
"""Broken variants no scenario catches yet, and why (kept so the BUGS table stays accounted for)."""

IN_FLIGHT_CONVENTIONS = ("inflight-409", "inflight-429")
"""Variants that answer a copy in flight 409 or 429 (+ Retry-After) where hookproof prefers 503."""


@pytest.fixture(scope="module")
def java_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reason = jdk_unavailable("receivers")
    if reason is not None:
        pytest.skip(reason)
    classes = tmp_path_factory.mktemp("java-zoo-classes")
    compiled = subprocess.run(
        ["javac", "-d", str(classes), str(SOURCE)], capture_output=True, text=True, timeout=180
    )
    assert compiled.returncode == 0, compiled.stderr
    port = free_port()
    env = zoo_env(
        port,
        MAX_BODY,
        STORE_WRITE_MS=str(STORE_WRITE_MS),
    )
    # Without TCP_NODELAY every HttpServer answer waits ~40 ms on Nagle and the client's delayed
    # ACK, which hides an ack sent before a commit that takes less than that.
    argv = ["java", "-Dsun.net.httpserver.nodelay=true", "-cp", str(classes), "WebhookZoo"]
    base = f"http://127.0.0.1:{port}"
    with ServerProcess.start(argv, env=env, ready_url=f"{base}/healthz") as server:
        yield base
        server.close()


def _check(base: str, variant: str, **overrides: object) -> dict[str, ScenarioResult]:
    return check_zoo_variant(base, variant, max_body=MAX_BODY, **overrides)


def _really_failed(result: ScenarioResult) -> bool:
    """Failed for more than a refusal answered with another 4xx than hookproof's table."""
    return result.outcome is Outcome.FAILED and any(
        f.cause != "convention" for f in result.failures
    )


def test_every_variant_of_the_bugs_table_is_accounted_for() -> None:
    source = SOURCE.read_text(encoding="utf-8")
    header = source.split("*/", 1)[0]
    tabled = set(re.findall(r"^ \*   ([a-z0-9-]+) {2,}", header, flags=re.MULTILINE))
    served = set(re.findall(r'^\s+[A-Z0-9_]+\("([a-z0-9-]+)"\)[,;]', source, flags=re.MULTILINE))
    assert tabled == served
    accounted = {"correct", *JAVA_MUST_FAIL, *NOT_CAUGHT, *IN_FLIGHT_CONVENTIONS}
    assert tabled == accounted
    assert not set(JAVA_MUST_FAIL) & set(NOT_CAUGHT)


def test_the_correct_java_receiver_breaks_no_guarantee(java_server: str) -> None:
    """It answers 400 to a timestamp outside the tolerance: only that convention (401 in
    hookproof's table) may differ; every other expectation holds."""
    results = _check(java_server, "correct")
    assert set(results) == {s.id for s in CATALOGUE.tagged(Harness.C)}
    assert broken_guarantees(results) == {}
    skipped = {sid for sid, r in results.items() if r.outcome is Outcome.SKIPPED}
    assert skipped == other_schemes_only()
    assert not [sid for sid, r in results.items() if _really_failed(r)]
    conventions = {sid for sid, r in results.items() if r.outcome is Outcome.FAILED}
    assert conventions <= {s.id for s in CATALOGUE if s.family == "clock"}


@pytest.mark.parametrize(("bug", "must_fail"), sorted(JAVA_MUST_FAIL.items()))
def test_a_broken_java_receiver_fails_the_scenarios_aimed_at_its_bug(
    java_server: str, bug: str, must_fail: frozenset[str]
) -> None:
    patience = SHORT_TTL_PATIENCE if bug == "short-ttl-dedupe" else None
    results = _check(java_server, bug, select=tuple(sorted(must_fail)), patience=patience)
    failed = {sid for sid, r in results.items() if _really_failed(r)}
    assert must_fail <= failed, bug
    if bug not in HARDENING_ONLY:
        assert any(results[sid].breaks_must for sid in must_fail), bug
    for scenario_id in must_fail:
        failure = results[scenario_id].failures[0]
        assert failure.expected
        assert failure.observed
        assert SECRET not in failure.reproduce + failure.observed


@pytest.mark.parametrize("variant", IN_FLIGHT_CONVENTIONS)
def test_a_copy_in_flight_asked_back_with_409_or_429_is_a_convention(
    java_server: str, variant: str
) -> None:
    """Any answer that sends a copy in flight back later (409, 423, 425, 429, 503) keeps the
    guarantee; hookproof prefers 503 with Retry-After (``should``), and a platform whose sender
    relies on 503 declares it (``[answers] in_flight``), which makes another code a ``must``."""
    selected = (
        "idempotency.concurrent-duplicates",
        "idempotency.in-flight-duplicate",
        "idempotency.staggered-duplicates",
    )
    results = _check(java_server, variant, select=selected)
    assert broken_guarantees(results) == {}
    conventions = [f for r in results.values() for f in r.failures if f.cause == CONVENTION]
    assert conventions, "8 copies at once against a 50 ms write: some are refused in flight"
    assert all(f.severity is Severity.SHOULD for f in conventions)
    declared = _check(
        java_server, variant, select=selected, answers=resolve_answers({"in_flight": [503]})
    )
    assert any(r.breaks_must for r in declared.values())
