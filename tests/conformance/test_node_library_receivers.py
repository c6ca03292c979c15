"""The receivers most Node teams deploy: express apps verifying with the official npm libraries
(``stripe``'s ``constructEvent`` over ``express.raw``, scheme ``stripe``; ``svix``'s
``Webhook.verify``, Standard Webhooks; GitHub's ``@octokit/webhooks``, its ``createNodeMiddleware``
or ``verify``, scheme ``github``), served by ``node_libs_receiver/server.js`` and checked over
real HTTP on loopback.

The documented samples (plus the dedupe and probe a team adds) and the careful variants pass every
``must``: a ``must`` failure on one of them would be a false alarm. The verbatim Svix sample's
failures are its own and explained (``test_the_verbatim_svix_sample_…``), and Stripe's sample
accepts an id-less event and sends stripe-node's error text back, which can name part of the
secret (two ``should`` failures, ``SAMPLE_SHOULDS``). Each broken variant fails the scenarios
aimed at its bug, a ``must`` among them; the bugs the catalogue grades only as a ``should`` are
pinned in ``BELOW_MUST``. One ``node``
process serves every variant, each under a path of its own. Skipped, saying why, where ``node`` is
not installed or ``npm ci`` fails.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.catalogue import CATALOGUE
from conformance.model import Harness
from conformance.results import Outcome, ScenarioResult
from tests.conformance.broken_receivers import PROBE_TOKEN, SECOND_SECRET
from tests.conformance.support import (
    SECRET,
    broken_guarantees,
    check_variant,
    node_receiver_unavailable,
    other_schemes_only,
)
from tests.support.processes import ServerProcess, free_port

pytestmark = pytest.mark.subprocess

HERE = Path(__file__).resolve().parent / "node_libs_receiver"
EXPRESS_RAW_DEFAULT_LIMIT = 100 * 1024
"""express.raw's default ``limit`` ('100kb'): what the samples enforce (413 past it)."""
CAREFUL_MAX_BODY = 64 * 1024
"""The limit the careful variants are configured with (``MAX_BODY``)."""
COMMIT_DELAY_MS = 60
"""How long each store's commit takes: long enough that a copy sent "at once" still arrives
while the first one is in flight, even when the first copy had a warm connection and the others
had to open theirs."""

DOCUMENTED = ("stripe-docs", "svix-docs-return", "github-docs")
CAREFUL = ("stripe-correct", "svix-correct", "github-correct")
ROTATING = frozenset(
    {*CAREFUL, "stripe-first-secret-only", "svix-first-secret-only", "github-verify-ignores-extra"}
)
"""The variants configured with two secrets (the samples take one)."""

KNOWN_MUST_FAILURES: dict[str, frozenset[str]] = {}
"""``must`` scenarios a documented sample fails for a reason of its own (see each comment)."""

SAMPLE_SHOULDS: dict[str, frozenset[str]] = {
    # Stripe's event id is the body's "id". The sample never checks it (Stripe always sends
    # one), so a signed event without an id is accepted, and the team's dedupe keys it on
    # `undefined`: nothing is broken until a sender signs id-less events, which Stripe does not.
    # And the sample answers `Webhook Error: ${err.message}`: for a Stripe-Signature describing
    # another secret (a masked secret= item), stripe-node's message names the length and last
    # four characters of the endpoint's secret, which the sample sends to whoever asked.
    "stripe-docs": frozenset({"signature.id-less-event", "response.no-secret-hint"}),
    # Octokit's middleware only asks that X-GitHub-Delivery be present: an empty or garbage one
    # on an authentic delivery is accepted (the id is not signed: a should), and a handler's
    # thrown 503 for a copy in flight cannot carry a Retry-After header, and the middleware reads
    # a body of any size (no 413): three shoulds.
    "github-docs": frozenset(
        {"signature.malformed-unsigned-id", "idempotency.in-flight-duplicate", "size.over-limit"}
    ),
}
"""What a documented sample fails as a ``should`` for a reason of its own (see each comment)."""

CONVENTIONS = frozenset(
    {"signature.tampered-body", "signature.wrong-secret", "response.problem-details"}
    | {s.id for s in CATALOGUE if s.family == "clock"}
)
"""What the samples may fail as a ``should``: 400 (not 401) to a bad signature or timestamp, a
refusal that is not problem+json, and stripe-node accepting timestamps in the future."""

MUST_FAIL: dict[str, frozenset[str]] = {
    "stripe-json-reserialized": frozenset({"signature.raw-bytes"}),
    "stripe-catch-500": frozenset(
        {"signature.tampered-body", "signature.wrong-secret", "signature.missing-signature"}
    ),
    "stripe-tolerance-zero": frozenset(
        {"clock.past-outside", "clock.replay-after-window", "clock.stale-then-genuine"}
    ),
    "stripe-tolerance-ms": frozenset(
        {"clock.past-outside", "clock.replay-after-window", "clock.stale-then-genuine"}
    ),
    "stripe-dedupe-before-verify": frozenset(
        {"signature.forged-then-genuine", "signature.tampered-then-genuine"}
    ),
    "stripe-dedupe-signature": frozenset(
        {"idempotency.sequential-duplicate", "idempotency.late-duplicate"}
    ),
    "stripe-ack-before-commit": frozenset({"response.ack-after-commit"}),
    "stripe-first-secret-only": frozenset({"signature.each-secret"}),
    "stripe-trust-loopback": frozenset(
        {"signature.wrong-secret", "signature.missing-signature", "signature.forged-then-genuine"}
    ),
    "svix-first-secret-only": frozenset({"signature.each-secret"}),
    "svix-raw-secret": frozenset({"signature.valid"}),
    "svix-latin1-body": frozenset({"signature.utf8-body"}),
    "svix-rethrow-non-verification": frozenset({"signature.body-not-json"}),
    "svix-check-then-act": frozenset(
        {"idempotency.in-flight-duplicate", "idempotency.concurrent-duplicates"}
    ),
    "svix-inflight-200": frozenset({"idempotency.staggered-duplicates"}),
    "svix-async-after-200": frozenset({"response.ack-after-commit"}),
    "svix-rawheaders-case": frozenset({"signature.header-name-case"}),
    "svix-no-dedupe": frozenset(
        {"idempotency.sequential-duplicate", "idempotency.concurrent-duplicates"}
    ),
    "github-verify-ignores-extra": frozenset({"signature.each-secret"}),
    "github-verify-reserialized": frozenset({"signature.raw-bytes"}),
    "github-algorithm-from-header": frozenset({"signature.malformed-headers"}),
    "github-dedupe-before-verify": frozenset(
        {"signature.forged-then-genuine", "signature.tampered-then-genuine"}
    ),
    "github-short-timeout": frozenset({"response.ack-after-commit"}),
    "github-no-dedupe": frozenset(
        {"idempotency.sequential-duplicate", "idempotency.concurrent-duplicates"}
    ),
}
"""For each broken variant (the table at the top of server.js), the scenarios that must fail."""

BELOW_MUST: dict[str, frozenset[str]] = {
    # An HTML 500 to an oversized body: the sender retries a body that can never fit.
    "stripe-html-500": frozenset({"size.over-limit"}),
    # No limit at all: the 205 KiB body is read whole and verified.
    "stripe-no-limit": frozenset({"size.over-limit"}),
}
"""Broken variants the catalogue catches only with a ``should`` (size.over-limit is one)."""


def test_every_variant_of_the_server_is_accounted_for() -> None:
    """server.js's VARIANTS, its table of bugs and this module agree: each variant is documented,
    careful, the verbatim Svix sample, caught at ``must``, caught below it, or not caught."""
    server = (HERE / "server.js").read_text()
    variants = set(re.findall(r"^  '([a-z0-9-]+)': ", server, re.MULTILINE))
    tabled = set(re.findall(r"^ \* \| ([a-z0-9]+-[a-z0-9-]+) +\|", server, re.MULTILINE))
    groups = [set(DOCUMENTED), set(CAREFUL), {"svix-docs"}, set(MUST_FAIL)]
    groups += [set(BELOW_MUST)]
    assert sum(len(group) for group in groups) == len(set().union(*groups))
    assert variants == set().union(*groups) == tabled
    assert len(MUST_FAIL) >= 12
    assert all(
        CATALOGUE.get(sid) for ids in [*MUST_FAIL.values(), *BELOW_MUST.values()] for sid in ids
    )


def _scheme(variant: str) -> str:
    return {"stripe": "stripe", "github": "github"}.get(variant.split("-", 1)[0], "standard")


@pytest.fixture(scope="module")
def node_server() -> Iterator[str]:
    reason = node_receiver_unavailable(HERE, "express", "stripe", "svix", "@octokit/webhooks")
    if reason is not None:
        pytest.skip(reason)
    port = free_port()
    secrets = f"{SECRET},{SECOND_SECRET}"
    env = {
        "STRIPE_SECRET": secrets,
        "SVIX_SECRETS": secrets,
        "GITHUB_SECRETS": secrets,
        "PROBE_TOKEN": PROBE_TOKEN,
        "MAX_BODY": str(CAREFUL_MAX_BODY),
        "COMMIT_DELAY_MS": str(COMMIT_DELAY_MS),
        "NODE_ENV": "production",
        "PORT": str(port),
    }
    base = f"http://127.0.0.1:{port}"
    ready = f"{base}/stripe-correct/_hookproof/events/x"
    with ServerProcess.start(["node", "server.js"], env=env, cwd=HERE, ready_url=ready) as server:
        yield base
        server.close()


def _check(base: str, variant: str, **overrides: object) -> dict[str, ScenarioResult]:
    secrets = (SECRET, SECOND_SECRET) if variant in ROTATING else (SECRET,)
    max_body = CAREFUL_MAX_BODY if variant in CAREFUL else EXPRESS_RAW_DEFAULT_LIMIT
    return check_variant(
        f"{base}/{variant}",
        secrets=secrets,
        probe_token=PROBE_TOKEN,
        max_body=max_body,
        scheme=_scheme(variant),
        **overrides,
    )


def _failed(results: dict[str, ScenarioResult]) -> set[str]:
    return {sid for sid, r in results.items() if r.outcome is Outcome.FAILED}


@pytest.mark.parametrize("variant", DOCUMENTED + CAREFUL)
def test_a_receiver_built_as_the_library_documents_it_breaks_no_guarantee(
    node_server: str, variant: str
) -> None:
    results = _check(node_server, variant)
    assert set(results) == {s.id for s in CATALOGUE.tagged(Harness.C)}
    scheme = _scheme(variant)
    skipped = {sid for sid, r in results.items() if r.outcome is Outcome.SKIPPED}
    assert skipped == other_schemes_only(scheme)
    assert set(broken_guarantees(results)) == KNOWN_MUST_FAILURES.get(variant, frozenset())
    allowed = CONVENTIONS | SAMPLE_SHOULDS.get(variant, frozenset())
    assert _failed(results) - KNOWN_MUST_FAILURES.get(variant, frozenset()) <= allowed
    if variant in CAREFUL:  # problem+json, 401 where hookproof's table says so
        assert _failed(results) <= {"clock.future-outside", "clock.far-future"}


def test_the_verbatim_svix_sample_breaks_musts_through_its_missing_return(
    node_server: str,
) -> None:
    """Svix's Express sample answers 400 in its catch but does not return: the code after it
    runs for a forged or stale copy too, so the team's dedupe claims the event id a refused copy
    carried (the genuine copy then gets 503 or "duplicate"), and the second answer's
    ERR_HTTP_HEADERS_SENT makes express destroy the socket under the next request on it. The
    receiver is wrong, not hookproof; with the `return` (svix-docs-return) every `must` holds."""
    results = _check(node_server, "svix-docs")
    broken = set(broken_guarantees(results))
    assert {  # by construction; malformed-headers and others also fail when the dying sockets
        # land under a later request, which depends on timing
        "signature.forged-then-genuine",
        "signature.tampered-then-genuine",
        "signature.garbled-then-genuine",
        "clock.stale-then-genuine",
    } <= broken
    assert "signature.valid" not in broken


@pytest.mark.parametrize(("variant", "must_fail"), sorted(MUST_FAIL.items()))
def test_a_broken_library_receiver_fails_the_scenarios_aimed_at_its_bug(
    node_server: str, variant: str, must_fail: frozenset[str]
) -> None:
    results = _check(node_server, variant, select=tuple(sorted(must_fail)))
    assert must_fail <= _failed(results), variant
    assert set(broken_guarantees(results)) & must_fail, variant
    for scenario_id in must_fail:
        failure = results[scenario_id].failures[0]
        assert failure.expected
        assert failure.observed
        assert SECRET not in failure.reproduce + failure.observed


@pytest.mark.parametrize(("variant", "should_fail"), sorted(BELOW_MUST.items()))
def test_a_bug_the_catalogue_grades_as_a_should(
    node_server: str, variant: str, should_fail: frozenset[str]
) -> None:
    results = _check(node_server, variant, select=tuple(sorted(should_fail)))
    assert should_fail <= _failed(results), variant
    assert not broken_guarantees(results), variant


@pytest.mark.parametrize(
    ("variant", "names_part"), [("stripe-docs", True), ("stripe-correct", False)]
)
def test_stripes_sample_sends_back_an_error_naming_part_of_the_secret(
    node_server: str, variant: str, names_part: bool
) -> None:
    """A Stripe-Signature describing another secret (a masked ``secret=`` item): stripe-node
    says how long the endpoint's secret is and how it ends, and Stripe's sample answers with
    that message; the careful variant answers in its own words. A ``should``: four characters
    do not forge a signature."""
    results = _check(node_server, variant, select=("response.no-secret-hint",))
    result = results["response.no-secret-hint"]
    assert (result.outcome is Outcome.FAILED) is names_part, result.failures
    assert not broken_guarantees(results)
    if names_part:
        failure = result.failures[0]
        assert "last four characters" in failure.observed
        assert SECRET[-4:] not in failure.observed + failure.reproduce
