"""Receivers built the way the public libraries' documentation shows pass every ``must`` in their
scheme, and the samples copied to the letter are caught where they break a guarantee.

The samples answer 400 (403 for GitHub) to every refusal, where hookproof's table says 401 for a
bad signature or timestamp: that convention is not a broken guarantee, so it is the only
difference allowed. Stripe's library accepts timestamps in the future (a ``should``).
"""

from __future__ import annotations

import pytest

from conformance.catalogue import CATALOGUE
from conformance.model import Harness, Severity
from conformance.results import Outcome, ScenarioResult
from receiver.app import ReceiverSettings, create_app
from tests.conformance.broken_receivers import PROBE_TOKEN, SECOND_SECRET, plain_receiver
from tests.conformance.library_receivers import (
    CORRECT,
    LIBRARY_BUGS,
    LIBRARY_MUST_FAIL,
    library_verify,
)
from tests.conformance.support import SECRET, app_settings, broken_guarantees, run_in_process

RAW_SECRETS = {
    "standard": (SECRET, SECOND_SECRET),
    "svix": (SECRET, SECOND_SECRET),
    "stripe": ("whsec_stripe_style_conformance_one", "whsec_stripe_style_conformance_two"),
    "github": ("github-webhook-secret-one", "github-webhook-secret-two"),
}
MAX_BODY = 4096


def _run(name: str, **overrides: object) -> dict[str, ScenarioResult]:
    scheme, _ = library_verify(name, ())
    secrets = RAW_SECRETS[scheme]
    _, verify = library_verify(name, secrets)
    app = plain_receiver(secrets, verify=verify, max_body=MAX_BODY)
    settings = app_settings(
        PROBE_TOKEN, scheme=scheme, secrets=secrets, max_body=MAX_BODY, **overrides
    )
    return run_in_process(app, settings)


@pytest.mark.parametrize("name", CORRECT)
def test_a_receiver_built_from_the_documented_sample_passes_every_must(name: str) -> None:
    results = _run(name)
    assert results
    broken = broken_guarantees(results)
    musts = {sid for sid in broken if CATALOGUE.get(sid).severity is Severity.MUST}
    assert musts == set(), broken
    ran = {sid for sid, r in results.items() if r.outcome is not Outcome.SKIPPED}
    assert {"signature.malformed-headers", "signature.each-secret"} <= ran
    assert len(ran) >= len(CATALOGUE.tagged(Harness.R)) // 2


@pytest.mark.parametrize("name", ["standardwebhooks", "svix"])
def test_a_replay_under_a_repeated_id_is_a_should_for_the_documented_libraries(name: str) -> None:
    """Given Starlette's request.headers, as the READMEs show, both libraries verify the last
    value of a repeated webhook-id while headers.get() dedupes on the first: the replay is
    applied under the other id. Graded should (docs/conformance.md, Repeated headers)."""
    results = _run(name, select=("signature.repeated-headers",))
    result = results["signature.repeated-headers"]
    assert result.outcome is Outcome.FAILED
    assert [(f.expected, f.severity) for f in result.failures] == [
        ("the probe shows no effect under the other id", Severity.SHOULD)
    ]
    assert not result.breaks_must


@pytest.mark.parametrize(("name", "must_fail"), sorted(LIBRARY_MUST_FAIL.items()))
def test_a_sample_copied_to_the_letter_is_caught(name: str, must_fail: frozenset[str]) -> None:
    results = _run(name, select=tuple(sorted(must_fail)))
    failed = {sid for sid, r in results.items() if r.outcome is Outcome.FAILED}
    assert must_fail <= failed, LIBRARY_BUGS[name]
    for sid in must_fail:
        observed = results[sid].failures[0].observed
        assert "500" in observed


def test_a_receiver_reading_svix_headers_needs_the_svix_scheme() -> None:
    """Svix sends svix-id, svix-timestamp and svix-signature (webhook-* only for white-labelled
    accounts); a receiver written from its manual-verification docs reads exactly those, so
    under the standard scheme every delivery is refused, and under --scheme svix none is."""
    secrets = RAW_SECRETS["svix"]
    _, verify = library_verify("svix_manual", secrets)
    app = plain_receiver(secrets, verify=verify, max_body=MAX_BODY)
    for scheme, outcome in (("standard", Outcome.FAILED), ("svix", Outcome.PASSED)):
        settings = app_settings(None, scheme=scheme, secrets=secrets, select=("signature.valid",))
        assert run_in_process(app, settings)["signature.valid"].outcome is outcome, scheme


def test_the_reference_receiver_verifies_the_svix_scheme() -> None:
    secrets = RAW_SECRETS["svix"]
    reference = ReceiverSettings(
        secrets=list(secrets),
        db=":memory:",
        scheme="svix",
        probe_token=PROBE_TOKEN,
        max_body=MAX_BODY,
    )
    settings = app_settings(PROBE_TOKEN, scheme="svix", secrets=secrets, max_body=MAX_BODY)
    results = run_in_process(create_app(reference), settings)
    assert broken_guarantees(results) == {}
    failed = {sid for sid, r in results.items() if r.outcome is Outcome.FAILED}
    assert failed == set()
    assert results["signature.each-secret"].outcome is Outcome.PASSED
