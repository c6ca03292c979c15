"""The zoo's PHP stack: Standard Webhooks receivers written in plain PHP as partners write them
(php://input, hash_hmac + hash_equals, PDO SQLite; ``php_receiver/router.php``), checked over
real HTTP on loopback.

One ``php -S`` with four workers (``PHP_CLI_SERVER_WORKERS``) serves every variant on a path of
its own, each with its own SQLite file. The correct variant passes every C-tagged scenario; each
broken variant fails the scenarios aimed at its bug, a ``must`` among them (except the two whose
only scenarios are ``should``). The bugs hookproof does not see from outside are listed in
``PHP_NOT_CAUGHT`` with the reason. Skipped, saying why, where ``php`` or its SQLite driver is
absent.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.catalogue import CATALOGUE
from conformance.model import Harness, Severity
from conformance.results import Outcome, ScenarioResult
from tests.conformance.support import (
    SECRET,
    broken_guarantees,
    check_zoo_variant,
    other_schemes_only,
    zoo_env,
)
from tests.support.processes import ServerProcess, free_port

pytestmark = pytest.mark.subprocess

HERE = Path(__file__).resolve().parent / "php_receiver"
MAX_BODY = 4096
PRUNE_PATIENCE_S = 3.0
"""Real seconds before the late duplicate of ``pruned_inbox``: past its 2-second pruning."""

PHP_MUST_FAIL: dict[str, frozenset[str]] = {
    "array_header": frozenset({"signature.repeated-headers"}),
    "reencoded_body": frozenset({"signature.raw-bytes"}),
    "consumed_input": frozenset({"signature.valid", "signature.raw-bytes"}),
    "strict_base64_false": frozenset(
        {"signature.malformed-headers", "signature.garbled-then-genuine"}
    ),
    "first_entry_only": frozenset(
        {"signature.rotation", "signature.unknown-version", "signature.list-positions"}
    ),
    "version_ignored": frozenset({"signature.malformed-headers"}),
    "no_abs": frozenset({"clock.future-outside", "clock.far-future"}),
    "tolerance_ms": frozenset(
        {"clock.past-outside", "clock.replay-after-window", "clock.stale-then-genuine"}
    ),
    "insert_before_verify": frozenset(
        {
            "signature.forged-then-genuine",
            "signature.tampered-then-genuine",
            "signature.garbled-then-genuine",
            "clock.stale-then-genuine",
        }
    ),
    # Not concurrent-duplicates: php -S's workers each run an event loop, and one idle worker
    # may accept every copy's connection while the bodies are held, then run them one by one
    # (no race, in some runs). A copy sent while the first is being handled finds that worker
    # busy and goes to another: staggered-duplicates races.
    "check_then_insert": frozenset({"idempotency.staggered-duplicates"}),
    "ack_before_commit": frozenset({"response.ack-after-commit", "signature.valid"}),
    "no_body_limit": frozenset({"size.over-limit"}),
    "first_secret_only": frozenset({"signature.each-secret"}),
    "pruned_inbox": frozenset({"idempotency.late-duplicate"}),
    "catch_all_200": frozenset(
        {
            "signature.tampered-body",
            "signature.wrong-secret",
            "signature.missing-signature",
            "signature.forged-then-genuine",
        }
    ),
    "unique_violation": frozenset(
        {
            "idempotency.sequential-duplicate",
            "idempotency.redrive-duplicate",
            "idempotency.late-duplicate",
        }
    ),
    "tenant_before_verify": frozenset({"signature.body-odd-json", "signature.body-not-json"}),
    # json_encode writes the leaked signature's '/' as '\/': found in that spelling too
    "debug_mismatch": frozenset({"response.no-secret-leak"}),
}
"""For each broken PHP variant (the table in router.php), the scenarios observed to fail."""

SHOULD_ONLY = frozenset({"no_abs", "no_body_limit"})
"""Variants whose bug only ``should`` scenarios aim at: a future timestamp accepted, and a body
past the limit accepted, are hardenings in hookproof's catalogue."""

PHP_NOT_CAUGHT: dict[str, str] = {
    "loose_compare": "`==` of two base64 strings compares them as strings: only its timing differs",
    "lenient_base64": "no scenario sends a valid signature with characters outside the alphabet",
    "intval_timestamp": "junk timestamps become 0, refused 401: any 4xx passes malformed-headers",
}
"""Broken variants that pass every scenario, and why the catalogue cannot see them."""


def _unavailable() -> str | None:
    """Why the PHP receivers cannot run here (``None``: they can)."""
    php = shutil.which("php")
    if php is None:
        return "php is not installed (the PHP receivers of the zoo need php-cli >= 8.1)"
    probe = 'exit(extension_loaded("pdo_sqlite") ? 0 : 1);'
    if subprocess.run([php, "-r", probe], capture_output=True, timeout=30).returncode != 0:
        return "php has no pdo_sqlite extension (install php-sqlite3)"
    return None


@pytest.fixture(scope="module")
def php_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reason = _unavailable()
    if reason is not None:
        pytest.skip(reason)
    port = free_port()
    env = zoo_env(  # php -S takes the port on its command line, not PORT
        port,
        MAX_BODY,
        PHP_RECEIVER_DATA=str(tmp_path_factory.mktemp("php_receiver")),
        PHP_CLI_SERVER_WORKERS="4",
    )
    base = f"http://127.0.0.1:{port}"
    argv = ["php", "-S", f"127.0.0.1:{port}", "router.php"]
    with ServerProcess.start(argv, env=env, cwd=HERE, ready_url=f"{base}/healthz") as server:
        try:
            yield base
        finally:
            server.kill_group()  # the workers outlive their parent


def _check(base: str, variant: str, **overrides: object) -> dict[str, ScenarioResult]:
    return check_zoo_variant(base, variant, max_body=MAX_BODY, **overrides)


def test_every_variant_of_the_router_is_accounted_for() -> None:
    """router.php's VARIANTS and this module agree: each broken variant is either caught (with
    its scenarios) or listed as not caught, with the reason."""
    router = (HERE / "router.php").read_text()
    variants = set(re.findall(r"^    '([a-z0-9_]+)' => \w+::class,$", router, re.MULTILINE))
    assert "correct" in variants
    assert not set(PHP_MUST_FAIL) & set(PHP_NOT_CAUGHT)
    assert variants - {"correct"} == set(PHP_MUST_FAIL) | set(PHP_NOT_CAUGHT)
    assert len(variants) >= 15
    assert all(CATALOGUE.get(sid) for ids in PHP_MUST_FAIL.values() for sid in ids)


def test_the_correct_php_receiver_passes_every_scenario(php_server: str) -> None:
    """It answers 401 and 400 as hookproof's table does, and 503 + Retry-After to a copy in
    flight, so not even a ``should`` fails."""
    results = _check(php_server, "correct")
    assert set(results) == {s.id for s in CATALOGUE.tagged(Harness.C)}
    assert broken_guarantees(results) == {}
    failed = {sid: r.failures for sid, r in results.items() if r.outcome is not Outcome.PASSED}
    assert set(failed) == other_schemes_only()  # skipped: not for the standard scheme


@pytest.mark.parametrize(("bug", "must_fail"), sorted(PHP_MUST_FAIL.items()))
def test_a_broken_php_receiver_fails_the_scenarios_aimed_at_its_bug(
    php_server: str, bug: str, must_fail: frozenset[str]
) -> None:
    overrides: dict[str, object] = {"select": tuple(sorted(must_fail))}
    if bug == "pruned_inbox":
        overrides["patience"] = PRUNE_PATIENCE_S
    results = _check(php_server, bug, **overrides)
    failed = {sid for sid, r in results.items() if r.outcome is Outcome.FAILED}
    assert must_fail <= failed, bug
    severities = {CATALOGUE.get(sid).severity for sid in must_fail}
    assert (Severity.MUST in severities) is (bug not in SHOULD_ONLY)
    for scenario_id in must_fail:
        failure = results[scenario_id].failures[0]
        assert failure.expected
        assert failure.observed
        assert SECRET not in failure.reproduce + failure.observed
