"""Severity that means something: a broken guarantee is ``must``; the exact refusal code is a
convention (``should``) unless the platform declares the codes it relies on (``[answers]`` or a
preset), and correct receivers built from the public libraries' samples pass every ``must``."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.answers import PRESETS, refusal_of, resolve_answers
from conformance.catalogue import CATALOGUE
from conformance.config import load_config
from conformance.exceptions import ConfigError
from conformance.model import Severity
from conformance.results import Outcome, ScenarioResult, Summary
from tests.conformance.documented_receivers import PROBE_TOKEN, documented_receiver
from tests.conformance.support import SECRET, app_settings, run_in_process

REFUSAL_CODE_SCENARIOS = {
    "signature.tampered-body",
    "signature.wrong-secret",
    "clock.past-outside",
    "clock.future-outside",
    "clock.far-future",
    "clock.replay-after-window",
}


def _broken_musts(results: dict[str, ScenarioResult]) -> dict[str, str]:
    return {
        sid: "; ".join(f"{f.expected} / {f.observed}" for f in r.failures) or r.message
        for sid, r in results.items()
        if r.breaks_must
    }


@pytest.mark.parametrize("scheme", ["standard", "stripe", "github"])
def test_a_receiver_built_from_the_documented_samples_passes_every_must(scheme: str) -> None:
    results = run_in_process(
        documented_receiver(scheme, SECRET), app_settings(PROBE_TOKEN, scheme=scheme)
    )
    assert _broken_musts(results) == {}
    assert Summary.of(results.values()).ok
    # it answers 400 (GitHub: 403) where hookproof's convention is 401: reported, as a should
    conventions = {
        sid for sid, r in results.items() if any(f.cause == "convention" for f in r.failures)
    }
    assert conventions
    assert all(results[sid].severity is Severity.SHOULD for sid in conventions)


def test_the_stripe_preset_makes_a_400_answering_receiver_pass_outright() -> None:
    results = run_in_process(
        documented_receiver("standard", SECRET),
        app_settings(PROBE_TOKEN, answers=resolve_answers("stripe")),
    )
    conventions = {sid for sid, r in results.items() for f in r.failures if f.cause}
    assert conventions == set()
    assert {sid for sid, r in results.items() if r.outcome is Outcome.FAILED} == {
        "response.problem-details"  # plain-text refusals: a should of its own
    }


def test_the_answers_table_turns_a_should_into_a_must() -> None:
    app = documented_receiver("github", SECRET)  # answers 403 to a bad signature
    select = ("signature.tampered-body", "signature.wrong-secret")
    plain = run_in_process(app, app_settings(PROBE_TOKEN, scheme="github", select=select))
    assert {r.severity for r in plain.values()} == {Severity.SHOULD}
    assert Summary.of(plain.values()).ok

    declared = resolve_answers({"bad_signature": [400, 401]})
    strict = run_in_process(
        app, app_settings(PROBE_TOKEN, scheme="github", select=select, answers=declared)
    )
    assert {r.outcome for r in strict.values()} == {Outcome.FAILED}
    assert {r.severity for r in strict.values()} == {Severity.MUST}
    failure = strict["signature.tampered-body"].failures[0]
    assert failure.expected.startswith("400 or 401 (the platform relies on it")
    assert "403" in failure.observed
    assert not Summary.of(strict.values()).ok

    allowed = resolve_answers({"bad_signature": [403]})
    ok = run_in_process(
        app, app_settings(PROBE_TOKEN, scheme="github", select=select, answers=allowed)
    )
    assert {r.outcome for r in ok.values()} == {Outcome.PASSED}


def test_a_refusal_that_is_not_a_4xx_stays_a_must_whatever_the_answers() -> None:
    from tests.conformance.broken_receivers import PROBE_TOKEN as PLAIN_TOKEN
    from tests.conformance.broken_receivers import plain_receiver

    results = run_in_process(
        plain_receiver(SECRET, bugs=frozenset({"no-signature-check"})),
        app_settings(PLAIN_TOKEN, select=("signature.tampered-body",)),
    )
    result = results["signature.tampered-body"]
    assert result.severity is Severity.MUST
    assert result.failures[0].expected.startswith("refused with a 4xx")


def test_which_answer_sends_a_copy_in_flight_back_is_a_convention_unless_declared() -> None:
    from tests.conformance.broken_receivers import PROBE_TOKEN as PLAIN_TOKEN
    from tests.conformance.broken_receivers import plain_receiver

    app = plain_receiver(SECRET, bugs=frozenset({"in-flight-409"}))
    select = ("idempotency.in-flight-duplicate",)
    plain = run_in_process(app, app_settings(PLAIN_TOKEN, select=select))
    result = plain["idempotency.in-flight-duplicate"]
    assert result.outcome is Outcome.FAILED
    assert result.severity is Severity.SHOULD
    assert [f.cause for f in result.failures] == ["convention"]
    assert "409" in result.failures[0].observed
    assert "503 with Retry-After" in result.failures[0].expected

    declared = resolve_answers({"in_flight": [503]})
    strict = run_in_process(app, app_settings(PLAIN_TOKEN, select=select, answers=declared))
    assert strict["idempotency.in-flight-duplicate"].severity is Severity.MUST
    assert (
        "the platform relies on it"
        in strict["idempotency.in-flight-duplicate"].failures[0].expected
    )

    allowed = resolve_answers({"in_flight": [409]})
    ok = run_in_process(app, app_settings(PLAIN_TOKEN, select=select, answers=allowed))
    assert ok["idempotency.in-flight-duplicate"].outcome is Outcome.PASSED


def test_a_copy_in_flight_answered_500_breaks_the_guarantee_whatever_the_answers() -> None:
    from tests.conformance.broken_receivers import PROBE_TOKEN as PLAIN_TOKEN
    from tests.conformance.broken_receivers import plain_receiver

    app = plain_receiver(SECRET, bugs=frozenset({"in-flight-500"}))
    select = ("idempotency.in-flight-duplicate",)
    results = run_in_process(app, app_settings(PLAIN_TOKEN, select=select))
    result = results["idempotency.in-flight-duplicate"]
    assert result.severity is Severity.MUST
    assert result.failures[0].expected.startswith("2xx, or asked to come back later")


def test_refusal_classes_are_derived_from_the_steps_for_every_exact_code() -> None:
    derived = {
        scenario.id: refusal_of(scenario, expectation)
        for scenario in CATALOGUE
        for expectation in scenario.expectations
        if refusal_of(scenario, expectation) is not None
    }
    assert set(derived) >= REFUSAL_CODE_SCENARIOS
    assert derived["signature.missing-id"] == "missing_header"
    assert derived["signature.wrong-secret"] == "bad_signature"
    assert derived["clock.replay-after-window"] == "stale_timestamp"
    # an exact 4xx expectation of a must whose class cannot be derived would stay a must
    for scenario in CATALOGUE:
        if scenario.severity is not Severity.MUST:
            continue
        for expectation in scenario.expectations:
            allowed = tuple(expectation.args.get("allowed", ()))
            exact = allowed and all(p.isdigit() and p.startswith("4") for p in allowed)
            if expectation.check == "status" and exact:
                assert refusal_of(scenario, expectation), (scenario.id, expectation)


def test_answers_in_the_config_file_and_presets(tmp_path: Path) -> None:
    config = tmp_path / "hookproof.toml"
    config.write_text('[answers]\npreset = "stripe"\nbad-signature = [400, 401]\n')
    answers = dict(load_config(str(config))["answers"])
    assert answers == {**PRESETS["stripe"], "bad_signature": (400, 401)}
    config.write_text('answers = "stripe"\n')
    assert dict(load_config(str(config))["answers"]) == dict(PRESETS["stripe"])
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.hookproof.answers]\nmissing_header = 422\n")
    assert load_config(str(pyproject))["answers"] == (("missing_header", (422,)),)


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ({"bad_sig": [400]}, "unknown refusal class"),
        ({"bad_signature": [500]}, "a refusal is a 4xx other than 410"),
        ({"bad_signature": [410]}, "a refusal is a 4xx other than 410"),
        ({"bad_signature": "400"}, "status code"),
        ({"in_flight": [500]}, "an in-flight copy is asked back with 409, 423, 425, 429, 503"),
        ({"in_flight": [400]}, "an in-flight copy is asked back with"),
        ("svixish", "unknown answers preset"),
    ],
)
def test_a_bad_answers_table_is_one_config_error(value: object, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        resolve_answers(value)  # type: ignore[arg-type]


def test_the_answers_preset_flag_reaches_the_run(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from conformance.commands import check

    seen = {}

    def fake(settings: object) -> int:
        seen["settings"] = settings
        return 0

    original = check.run_settings
    check.run_settings = fake  # type: ignore[assignment]
    try:
        result = CliRunner().invoke(
            check.check_command,
            [
                "http://127.0.0.1:9/webhooks",
                "--secret",
                SECRET,
                "--answers",
                "stripe",
                "--max-time",
                "7.5",
            ],
            standalone_mode=False,
        )
    finally:
        check.run_settings = original  # type: ignore[assignment]
    assert result.exception is None, result.output
    settings = seen["settings"]
    assert dict(settings.answers) == dict(PRESETS["stripe"])  # type: ignore[attr-defined]
    assert settings.max_time == 7.5  # type: ignore[attr-defined]
