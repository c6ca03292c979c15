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


@pytest.mark.parametrize(("name", "must_fail"), sorted(LIBRARY_MUST_FAIL.items()))
def test_a_sample_copied_to_the_letter_is_caught(name: str, must_fail: frozenset[str]) -> None:
    results = _run(name, select=tuple(sorted(must_fail)))
    failed = {sid for sid, r in results.items() if r.outcome is Outcome.FAILED}
    assert must_fail <= failed, LIBRARY_BUGS[name]
    for sid in must_fail:
        observed = results[sid].failures[0].observed
        assert "500" in observed
