"""The runner's discriminating power: every deliberately broken receiver fails the scenarios that
target its bug, a correct receiver written without hookproof's middleware passes all of them, and
every receiver-side scenario is failed by at least one broken receiver."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.catalogue import CATALOGUE
from conformance.model import Harness, Severity
from conformance.results import Outcome
from tests.conformance.broken_receivers import (
    BROKEN,
    MAX_BODY,
    MUST_FAIL,
    PROBE_TOKEN,
    SECOND_SECRET,
    SETTINGS,
    TWO_SECRETS,
    plain_receiver,
)
from tests.conformance.support import SECRET, app_settings, run_in_process

HARDENING_ONLY = frozenset(
    {
        "accepts-far-future",
        "plain-text-errors",
        "no-body-limit",
        "body-limit-500",
        "case-insensitive-compare",
        "dedupes-on-last-id",
        "exact-content-type",
    }
)
"""Bugs that break a recommendation (a ``should``), not a guarantee."""


def test_a_correct_receiver_without_hookproof_passes_everything(tmp_path: Path) -> None:
    app = plain_receiver((SECRET, SECOND_SECRET), db_path=str(tmp_path / "inbox.sqlite"))
    settings = app_settings(PROBE_TOKEN, secrets=(SECRET, SECOND_SECRET), max_body=MAX_BODY)
    results = run_in_process(app, settings)
    outcomes = {sid: r.outcome for sid, r in results.items()}
    assert outcomes == {  # scenarios of other schemes only (an id-less event) are skipped
        s.id: Outcome.PASSED if "standard" in s.schemes else Outcome.SKIPPED
        for s in CATALOGUE.tagged(Harness.R)
    }


@pytest.mark.parametrize(("bug", "must_fail"), sorted(MUST_FAIL.items()))
def test_a_broken_receiver_fails_the_scenarios_that_target_its_bug(
    bug: str, must_fail: frozenset[str]
) -> None:
    secrets = (SECRET, SECOND_SECRET) if bug in TWO_SECRETS else (SECRET,)
    app = plain_receiver(secrets, bugs=frozenset({bug}))
    overrides: dict[str, object] = {
        "secrets": secrets,
        "max_body": MAX_BODY,
        **SETTINGS.get(bug, {}),
    }
    if bug == "slow":  # every answer would time out: check only what targets it, quickly
        overrides |= {"timeout": 0.2, "select": tuple(must_fail), "samples": 2}
    results = run_in_process(app, app_settings(PROBE_TOKEN, **overrides))
    failed = {sid for sid, r in results.items() if r.outcome is Outcome.FAILED}
    assert must_fail <= failed, f"{bug}: {BROKEN[bug]}"
    if bug not in HARDENING_ONLY:  # a broken guarantee: a must-level verdict is what fails
        assert Severity.MUST in {CATALOGUE.get(sid).severity for sid in must_fail}, bug
    for scenario_id in must_fail:
        failure = results[scenario_id].failures[0]
        assert failure.expected
        assert failure.observed
        assert SECRET not in failure.reproduce + failure.observed


ELSEWHERE = {
    "signature.header-name-case": "an ASGI app never sees a header name's case (the server "
    "lowercases names); the Node library zoo's svix-rawheaders-case fails it",
    "signature.nul-escape": "these receivers keep their state in SQLite, which holds U+0000; "
    "the Flask zoo's std-payload-jsonb (a PostgreSQL jsonb events table) fails it",
}
"""Scenarios no in-process broken receiver can fail, and which zoo does."""


def test_every_receiver_side_scenario_is_failed_by_some_broken_receiver() -> None:
    """Of the standard scheme's (these receivers speak it); the others' are failed by the Node
    library zoo's Stripe sample (test_node_library_receivers)."""
    receiver_side = {
        s.id for s in CATALOGUE if s.tags & {Harness.R, Harness.C} and "standard" in s.schemes
    } - set(ELSEWHERE)
    covered = set().union(*MUST_FAIL.values())
    assert receiver_side - covered == set()
    assert covered <= receiver_side
    assert set(MUST_FAIL) == set(BROKEN)


def test_without_a_probe_duplicates_are_judged_by_status_and_say_so() -> None:
    app = plain_receiver(SECRET, bugs=frozenset({"no-dedupe"}))
    results = run_in_process(app, app_settings(None, select=("idempotency",)))
    sequential = results["idempotency.sequential-duplicate"]
    assert sequential.observed_by == "status"
    assert sequential.outcome is Outcome.PASSED  # status codes alone cannot see a second effect
    assert results["signature.valid"].observed_by if "signature.valid" in results else True
    skipped = run_in_process(app, app_settings(None, select=("response.ack-after-commit",)))
    assert skipped["response.ack-after-commit"].outcome is Outcome.SKIPPED


def test_with_a_probe_the_same_duplicate_is_judged_by_effects() -> None:
    app = plain_receiver(SECRET, bugs=frozenset({"no-dedupe"}))
    results = run_in_process(
        app, app_settings(PROBE_TOKEN, select=("idempotency.sequential-duplicate",))
    )
    result = results["idempotency.sequential-duplicate"]
    assert result.observed_by == "probe"
    assert result.outcome is Outcome.FAILED
    assert "2 effect(s)" in result.failures[0].observed
    assert "Bearer <redacted>" in result.failures[0].reproduce


def test_a_probe_that_breaks_its_contract_is_a_runner_error_not_a_failure() -> None:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from conformance.events import RunFinished
    from conformance.reporters import junit_document
    from conformance.results import Summary

    async def accept(request: Request) -> Response:
        await request.body()
        return JSONResponse({"ok": True})

    async def garbled_probe(request: Request) -> Response:
        return JSONResponse({"state": "done"})

    app = Starlette(
        routes=[
            Route("/webhooks", accept, methods=["POST"]),
            Route("/_hookproof/events/{event_id}", garbled_probe),
        ]
    )
    results = run_in_process(app, app_settings(PROBE_TOKEN, select=("signature.valid",)))
    result = results["signature.valid"]
    assert result.outcome is Outcome.ERROR
    assert "probe contract" in result.message
    finished = RunFinished((result,), Summary.of([result]), 0.1)
    case = junit_document("http://x/webhooks", finished).getroot().find("testsuite/testcase")
    assert case is not None
    assert case.find("error") is not None
    assert case.find("failure") is None
