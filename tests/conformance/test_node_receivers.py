"""The zoo's second stack: receivers written in Node (express and the npm ``standardwebhooks``
package, ``node_receiver/server.js``), checked over real HTTP on loopback.

The correct variant passes every C-tagged scenario; each broken variant fails the scenarios aimed
at its bug, and a ``must`` scenario among them. One ``node`` process serves every variant, each on
a path of its own. Skipped, saying why, where ``node`` is not installed or the npm packages
cannot be installed.
"""

from __future__ import annotations

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
    node_receiver_unavailable,
    other_schemes_only,
    zoo_env,
)
from tests.support.processes import ServerProcess, free_port

pytestmark = pytest.mark.subprocess

HERE = Path(__file__).resolve().parent / "node_receiver"
MAX_BODY = 4096

NODE_MUST_FAIL: dict[str, frozenset[str]] = {
    "timing-safe-equal": frozenset({"signature.wrong-length-entry"}),
    "starts-with": frozenset({"signature.truncated-signature"}),
    "lowercase-compare": frozenset({"signature.case-swapped"}),
    "default-limit": frozenset({"size.within-limit"}),
    "lowercase-key": frozenset({"idempotency.case-distinct-ids"}),
    "express-json": frozenset({"signature.raw-bytes"}),
    "tolerance-in-ms": frozenset({"clock.past-outside", "clock.replay-after-window"}),
    "no-await-commit": frozenset({"response.ack-after-commit"}),
    "seen-before-verify": frozenset(
        {"signature.forged-then-genuine", "signature.tampered-then-genuine"}
    ),
    "first-entry-only": frozenset({"signature.list-positions"}),
    "dedupe-on-signature": frozenset(
        {"idempotency.late-duplicate", "idempotency.sequential-duplicate"}
    ),
    "in-flight-500": frozenset({"idempotency.concurrent-duplicates"}),
    "future-unbounded": frozenset({"clock.future-outside", "clock.far-future"}),
    "only-first-secret": frozenset({"signature.each-secret"}),
    "narrow-catch": frozenset({"signature.body-not-json"}),
    "catch-all-200": frozenset({"signature.tampered-body", "signature.forged-then-genuine"}),
    "header-case": frozenset({"signature.valid"}),
    "queue-every-copy": frozenset(
        {"idempotency.sequential-duplicate", "idempotency.late-duplicate"}
    ),
    "lru-cache": frozenset({"idempotency.duplicate-after-other-events"}),
    "tenant-from-body": frozenset({"signature.body-odd-json"}),
    "close-abandon": frozenset({"idempotency.sender-hung-up"}),
    "strict-content-type": frozenset({"signature.content-type-charset"}),
}
"""For each broken Node variant (``BUGS`` in server.js), the scenarios that must fail."""

HARDENING_ONLY = frozenset({"future-unbounded", "lowercase-compare", "strict-content-type"})
"""Bugs that break a recommendation (a ``should``), not a guarantee: a timestamp from the future
accepted, a signature compared ignoring case (building one takes the genuine signature), a
media type compared with its parameters (the standard scheme's senders send none)."""

QUEUED = frozenset({"queued", "queue-every-copy"})
"""Variants that apply effects from a queue after answering: checked with ``--settle 1s``."""

DECLARED_MAX_BODY: dict[str, int] = {"default-limit": 256 * 1024}
"""Variants checked with another declared ``--max-body`` than the server's (the limit the team
believes it has, above express's 100kb default)."""


@pytest.fixture(scope="module")
def node_server() -> Iterator[str]:
    reason = node_receiver_unavailable(HERE, "standardwebhooks")
    if reason is not None:
        pytest.skip(reason)
    port = free_port()
    env = zoo_env(port, MAX_BODY)
    base = f"http://127.0.0.1:{port}"
    with ServerProcess.start(
        ["node", "server.js"], env=env, cwd=HERE, ready_url=f"{base}/correct/_hookproof/events/x"
    ) as server:
        yield base
        server.close()


STUCK = frozenset({"close-abandon"})
"""Variants whose retries stay "in flight" until ``--timeout`` has passed: checked with 1 s."""


def _check(base: str, variant: str, **overrides: object) -> dict[str, ScenarioResult]:
    if variant in QUEUED:
        overrides.setdefault("settle", 1.0)
    if variant in STUCK:
        overrides.setdefault("timeout", 1.0)
    overrides.setdefault("max_body", DECLARED_MAX_BODY.get(variant, MAX_BODY))
    return check_zoo_variant(base, variant, **overrides)


@pytest.mark.parametrize("variant", ["correct", "queued"])
def test_the_correct_node_receiver_breaks_no_guarantee(node_server: str, variant: str) -> None:
    """Built as the npm package documents it, it answers 400 to every refusal: only that
    convention (401 in hookproof's table) may differ; every other expectation holds. The same
    for ``queued``, which applies its effects from a queue after answering (``--settle``)."""
    results = _check(node_server, variant)
    assert set(results) == {s.id for s in CATALOGUE.tagged(Harness.C)}
    assert broken_guarantees(results) == {}
    skipped = {sid for sid, r in results.items() if r.outcome is Outcome.SKIPPED}
    assert skipped == other_schemes_only()
    conventions = {sid for sid, r in results.items() if r.outcome is Outcome.FAILED}
    assert conventions <= {"signature.tampered-body", "signature.wrong-secret"} | {
        s.id for s in CATALOGUE if s.family == "clock"
    }


@pytest.mark.parametrize(("bug", "must_fail"), sorted(NODE_MUST_FAIL.items()))
def test_a_broken_node_receiver_fails_the_scenarios_aimed_at_its_bug(
    node_server: str, bug: str, must_fail: frozenset[str]
) -> None:
    results = _check(node_server, bug, select=tuple(sorted(must_fail)))
    failed = {sid for sid, r in results.items() if r.outcome is Outcome.FAILED}
    assert must_fail <= failed, bug
    severities = {CATALOGUE.get(sid).severity for sid in must_fail}
    if bug not in HARDENING_ONLY:
        assert Severity.MUST in severities
    for scenario_id in must_fail:
        failure = results[scenario_id].failures[0]
        assert failure.expected
        assert failure.observed
        assert SECRET not in failure.reproduce + failure.observed
