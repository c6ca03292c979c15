"""The zoo's Go stack: Standard Webhooks receivers written with the standard library only
(``go_receiver/main.go``), checked over real HTTP on loopback.

The variants were written blind (from the Standard Webhooks spec and the probe contract, not
from the catalogue), and the tables below record what ``hookproof check`` found: the correct
variant breaks no guarantee; each variant in :data:`GO_MUST_FAIL` fails the ``must`` scenarios
aimed at its bug; the bugs of :data:`GO_SHOULD_ONLY` show only as ``should`` failures, and those
of :data:`GO_NOT_CAUGHT` not at all, each with the reason. One binary, built once per module with
``go build`` (the standard library only, Go >= 1.19), serves every variant on a path of its own.
Skipped, saying why, where ``go`` is not installed or the build fails.
"""

from __future__ import annotations

import re
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
    go_build,
    other_schemes_only,
    zoo_env,
)
from tests.support.processes import ServerProcess, free_port

pytestmark = pytest.mark.subprocess

HERE = Path(__file__).resolve().parent / "go_receiver"
MAX_BODY = 4096

GO_MUST_FAIL: dict[str, frozenset[str]] = {
    "header-map-case": frozenset({"signature.valid", "signature.header-name-case"}),
    "split-panic": frozenset({"signature.malformed-headers"}),
    "check-then-act": frozenset(
        {"idempotency.concurrent-duplicates", "idempotency.staggered-duplicates"}
    ),
    "ack-then-goroutine": frozenset({"response.ack-after-commit"}),
    "json-remarshal": frozenset({"signature.raw-bytes", "signature.valid"}),
    "dedupe-id-signature": frozenset(
        {"idempotency.sequential-duplicate", "idempotency.late-duplicate"}
    ),
    "first-secret-only": frozenset({"signature.each-secret"}),
    "first-entry-only": frozenset({"signature.list-positions", "signature.rotation"}),
    "whsec-key": frozenset({"signature.valid"}),
    "record-before-verify": frozenset(
        {
            "signature.forged-then-genuine",
            "signature.tampered-then-genuine",
            "signature.garbled-then-genuine",
        }
    ),
    "duration-as-seconds": frozenset({"clock.past-outside", "clock.replay-after-window"}),
    "prefix-compare": frozenset({"signature.truncated-signature"}),
    "tenant-assert": frozenset({"signature.body-odd-json"}),
    "ctx-abandon": frozenset({"idempotency.sender-hung-up"}),
}
"""For each broken Go variant (``BUGS`` in main.go), the ``must`` scenarios that fail."""

GO_SHOULD_ONLY: dict[str, frozenset[str]] = {
    # An oversized body is refused, with 500 (a retry invitation) instead of 413: the event is
    # never applied, so only the answer's code is wrong.
    "maxbytes-500": frozenset({"size.over-limit"}),
    # io.LimitReader truncates an oversized body silently; the truncated body fails the
    # signature and is refused 401 instead of 413. Genuine bodies under the limit are intact.
    "limit-reader": frozenset({"size.over-limit"}),
    # A timestamp in the future is never too new: a hardening, graded should.
    "future-unbounded": frozenset({"clock.future-outside", "clock.far-future"}),
    # 409 to an in-flight copy is among the "come back later" answers hookproof tolerates;
    # 503 with Retry-After is the expected one.
    "in-flight-409": frozenset(
        {"idempotency.concurrent-duplicates", "idempotency.in-flight-duplicate"}
    ),
    # json.Unmarshal takes a signed body that is not UTF-8 (invalid bytes become U+FFFD) and
    # the event is applied once: only the secret's holder can send it, so accepting it is a
    # convention broken (signed_bad_body), not a guarantee; an unsigned one is still refused.
    "utf8-unchecked": frozenset({"signature.body-not-utf8"}),
    # The whole header compared with "application/json": a genuine delivery with a charset is
    # refused 415. The standard scheme's senders send none, so it is a should.
    "content-type-equal": frozenset({"signature.content-type-charset"}),
}
"""Broken Go variants whose bug only ``should`` scenarios catch: they break no guarantee."""

GO_NOT_CAUGHT: dict[str, str] = {
    "bytes-equal": "bytes.Equal is not constant time: a timing leak, not observable in answers",
    "atoi-ignored": (
        "a malformed timestamp reads 0 (1970) and is refused 401 as stale: still a refusal, "
        "and a 4xx is all signature.malformed-headers asks of it"
    ),
}
"""Broken Go variants no scenario catches, and why."""


def _variants_in_source() -> tuple[list[str], set[str]]:
    """The variants main.go serves (``variantNames``) and the names of its ``BUGS`` table."""
    source = (HERE / "main.go").read_text()
    listed = re.search(r"var variantNames = \[\]string\{(.*?)\n\}", source, re.S)
    assert listed is not None
    served = re.findall(r'"([a-z0-9-]+)"', listed.group(1))
    table = set(re.findall(r"^//\t([a-z0-9-]+) ", source, re.M))
    return served, table


@pytest.fixture(scope="module")
def go_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary, reason = go_build(HERE, tmp_path_factory.mktemp("go_receiver"), "receivers")
    if binary is None:
        pytest.skip(reason)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with ServerProcess.start(
        [str(binary)],
        env=zoo_env(port, MAX_BODY),
        cwd=HERE,
        ready_url=f"{base}/correct/_hookproof/events/x",
    ) as server:
        yield base
        server.close()


STUCK = frozenset({"ctx-abandon"})
"""Variants whose retries stay "in flight" until ``--timeout`` has passed: checked with 1 s."""


def _check(base: str, variant: str, **overrides: object) -> dict[str, ScenarioResult]:
    if variant in STUCK:
        overrides.setdefault("timeout", 1.0)
    return check_zoo_variant(base, variant, max_body=MAX_BODY, **overrides)


def test_every_go_variant_is_accounted_for() -> None:
    served, table = _variants_in_source()
    assert len(served) == len(set(served))
    assert set(served) == table
    tables = [set(GO_MUST_FAIL), set(GO_SHOULD_ONLY), set(GO_NOT_CAUGHT)]
    assert sum(len(t) for t in tables) == len(set().union(*tables)), "a variant in two tables"
    assert set().union(*tables) | {"correct"} == set(served)
    known = {s.id for s in CATALOGUE}
    for scenarios in [*GO_MUST_FAIL.values(), *GO_SHOULD_ONLY.values()]:
        assert scenarios <= known


def test_the_correct_go_receiver_breaks_no_guarantee(go_server: str) -> None:
    results = _check(go_server, "correct")
    assert set(results) == {s.id for s in CATALOGUE.tagged(Harness.C)}
    assert broken_guarantees(results) == {}
    failed = {sid for sid, r in results.items() if r.outcome is Outcome.FAILED}
    assert failed == set()
    skipped = {sid for sid, r in results.items() if r.outcome is Outcome.SKIPPED}
    assert skipped == other_schemes_only()


@pytest.mark.parametrize(("bug", "must_fail"), sorted(GO_MUST_FAIL.items()))
def test_a_broken_go_receiver_fails_the_must_aimed_at_its_bug(
    go_server: str, bug: str, must_fail: frozenset[str]
) -> None:
    results = _check(go_server, bug, select=tuple(sorted(must_fail)))
    failed = {sid for sid, r in results.items() if r.outcome is Outcome.FAILED}
    assert must_fail <= failed, bug
    for scenario_id in must_fail:
        assert CATALOGUE.get(scenario_id).severity is Severity.MUST, scenario_id
        assert results[scenario_id].breaks_must
        failure = results[scenario_id].failures[0]
        assert failure.expected
        assert failure.observed
        assert SECRET not in failure.reproduce + failure.observed


@pytest.mark.parametrize(("bug", "should_fail"), sorted(GO_SHOULD_ONLY.items()))
def test_a_go_bug_only_a_should_catches_breaks_no_guarantee(
    go_server: str, bug: str, should_fail: frozenset[str]
) -> None:
    results = _check(go_server, bug)
    assert broken_guarantees(results) == {}, bug
    failed = {sid for sid, r in results.items() if r.outcome is Outcome.FAILED}
    assert should_fail <= failed, bug


@pytest.mark.parametrize("bug", sorted(GO_NOT_CAUGHT))
def test_a_go_bug_no_scenario_catches_passes_the_whole_catalogue(go_server: str, bug: str) -> None:
    results = _check(go_server, bug)
    assert broken_guarantees(results) == {}, bug
    failed = {sid for sid, r in results.items() if r.outcome is Outcome.FAILED}
    assert failed == set(), (bug, GO_NOT_CAUGHT[bug])
