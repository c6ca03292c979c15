"""The catalogue as data: one registry, well-formed, every step and check interpretable by each
harness a scenario is tagged for, the minimum of DESIGN §5 present, and docs/scenarios.md equal to
what the registry generates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.catalogue import CATALOGUE
from conformance.checks import RECEIVER_CHECKS
from conformance.cli import main
from conformance.commands.scenarios import scenarios_command
from conformance.config import CheckSettings
from conformance.docs import catalogue_markdown
from conformance.exceptions import CatalogueError, UsageError
from conformance.harnesses.sender_steps import SENDER_ACTIONS
from conformance.harnesses.simulated import S_ACTIONS
from conformance.harnesses.wire_steps import ACTIONS
from conformance.model import Harness, Scenario, Severity, Side, expect, step
from conformance.registry import Registry
from conformance.sender_checks import SENDER_CHECKS
from conformance.session import plan

ROOT = Path(__file__).resolve().parents[2]

MINIMUM = {
    "signature": {
        "valid",
        "tampered-body",
        "wrong-secret",
        "missing-id",
        "missing-timestamp",
        "missing-signature",
        "malformed-headers",
        "rotation",
        "unknown-version",
        "raw-bytes",
    },
    "clock": {
        "past-inside",
        "past-outside",
        "future-inside",
        "future-outside",
        "replay-after-window",
    },
    "idempotency": {
        "sequential-duplicate",
        "crash-after-send",
        "concurrent-duplicates",
        "redrive-duplicate",
        "double-redrive",
        "distinct-same-body",
    },
    "response": {"within-timeout", "ack-after-commit"},
    "size": {"over-limit"},
    "deadline": {"retry-before", "retry-at", "retry-after", "first-too-late", "worker-clock-skew"},
    "classification": {
        "gone",
        "unauthorized",
        "forbidden",
        "client-error-strict",
        "client-error-schedule",
        "conflict-strict",
        "conflict-schedule",
        "retry-after-inside",
        "retry-after-beyond",
        "ambiguous-transport",
        "invalid-envelope",
    },
    "leases": {"expired-reclaimed", "two-workers-race"},
    "redrive": {
        "missing-fields",
        "compare-and-set",
        "atomic-bulk",
        "explicit-attempt",
        "digest-changed",
    },
    "schedules": {"fixed-from-scheduled", "full-jitter-bounds"},
    "story": {"renewal-reminder"},
}
TAGS = {
    "signature": "RC",
    "clock": "RC",
    "idempotency": "SRC",
    "response": "RC",
    "size": "RC",
    "deadline": "S",
    "classification": "S",
    "leases": "S",
    "redrive": "S",
    "schedules": "S",
    "platform": "S",
    "story": "SR",
    "sender": "X",
}


def test_the_minimum_catalogue_is_present_with_its_tags() -> None:
    ids = set(CATALOGUE.ids())
    for family, slugs in MINIMUM.items():
        for slug in slugs:
            assert f"{family}.{slug}" in ids
    for scenario in CATALOGUE:
        allowed = set(TAGS[scenario.family])
        assert {t.value for t in scenario.tags} <= allowed, scenario.id


@pytest.mark.parametrize("scenario", list(CATALOGUE), ids=CATALOGUE.ids())
def test_every_step_and_check_is_interpretable_by_its_harnesses(scenario: Scenario) -> None:
    assert scenario.title
    assert scenario.guarantee.endswith(".")
    if scenario.tags & {Harness.R, Harness.C}:
        assert all(s.action in ACTIONS or s.action in SENDER_ACTIONS for s in scenario.steps)
        receiver = scenario.expectations_of(Side.RECEIVER)
        assert receiver, "a receiver-side scenario states what the receiver must show"
        assert all(e.check in RECEIVER_CHECKS for e in receiver)
    if Harness.S in scenario.tags:
        assert all(s.action in S_ACTIONS for s in scenario.steps)
        sender = scenario.expectations_of(Side.SENDER)
        assert sender, "a sender-side scenario states what the sender must end with"
        assert all(e.check in SENDER_CHECKS for e in sender)
    assert all(e.says for e in scenario.expectations)


def test_the_registry_refuses_duplicates_and_bad_ids() -> None:
    one = Scenario(
        "x.one",
        "t",
        "g.",
        Severity.MUST,
        frozenset({Harness.R}),
        (step("deliver", event="a", label="d"),),
        (expect("status", "2xx", label="d", allowed=("2xx",)),),
    )
    with pytest.raises(CatalogueError):
        Registry([one, one])
    with pytest.raises(CatalogueError):
        Registry([Scenario("Bad Id", "t", "g.", Severity.MUST, frozenset({Harness.R}), (), ())])


@pytest.mark.parametrize(
    ("select", "deselect", "expected"),
    [
        (("clock",), (), {s.id for s in CATALOGUE if s.family == "clock"}),
        (("should",), (), {s.id for s in CATALOGUE if s.severity is Severity.SHOULD}),
        (
            ("S",),
            ("redrive",),
            {s.id for s in CATALOGUE if Harness.S in s.tags and s.family != "redrive"},
        ),
        (
            ("signature.missing-*",),
            (),
            {"signature.missing-id", "signature.missing-timestamp", "signature.missing-signature"},
        ),
        (("signature.valid", "clock.far-future"), (), {"signature.valid", "clock.far-future"}),
    ],
)
def test_selection_by_id_glob_family_tag_and_severity(
    select: tuple[str, ...], deselect: tuple[str, ...], expected: set[str]
) -> None:
    assert {s.id for s in CATALOGUE.select(select, deselect)} == expected


def test_an_unknown_selector_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="matches no scenario"):
        CATALOGUE.select(("signatur",))


def test_docs_scenarios_md_is_generated_from_the_registry() -> None:
    committed = (ROOT / "docs" / "scenarios.md").read_text(encoding="utf-8")
    assert committed == catalogue_markdown(CATALOGUE), (
        "docs/scenarios.md is stale: run 'hookproof scenarios --markdown > docs/scenarios.md'"
    )
    for scenario in CATALOGUE:
        assert f"### `{scenario.id}`" in committed
        assert scenario.guarantee in committed


def test_scenarios_lists_the_catalogue_as_a_table_and_as_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["scenarios"]) == 0
    table = capsys.readouterr().out
    assert all(sid in table for sid in CATALOGUE.ids())
    assert main(["scenarios", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in records] == CATALOGUE.ids()
    assert {"guarantee", "severity", "tags", "steps", "expectations"} <= set(records[0])
    assert main(["scenarios", "--json", "--markdown"]) == 2
    assert scenarios_command.name == "scenarios"


@pytest.mark.parametrize("harness", [Harness.C, Harness.R])
def test_a_scenario_sending_its_first_copy_early_runs_after_every_other(harness: Harness) -> None:
    """``plan`` keeps the catalogue's order but for the scenarios with an ``early`` step, which
    run last: the whole run passes between their two copies."""
    planned = plan(CheckSettings(), harness)
    early = [s for s in planned if any(step.args.get("early") for step in s.steps)]
    assert {s.id for s in early} == {
        "idempotency.redrive-duplicate",
        "idempotency.double-redrive",
        "idempotency.late-duplicate",
    } & {s.id for s in planned}
    assert any(s.id == "idempotency.late-duplicate" for s in early)
    assert planned[-len(early) :] == early
    others = [s for s in planned if s not in early]
    assert others == [s for s in CATALOGUE.select(harness=harness) if s not in early]
