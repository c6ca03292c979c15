"""Every scenario runs under every harness it is tagged for and passes against hookproof's own
parts: S (the sender simulator against the scripted receiver) and R (the reference receiver in
process, under each signing scheme)."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest

from conformance.catalogue import CATALOGUE
from conformance.harnesses.simulated import SenderHarness
from conformance.model import Harness, Scenario
from conformance.results import Outcome
from receiver.app import ReceiverSettings, create_app
from tests.conformance.support import SECRET, app_settings, run_in_process

STRIPE_SECRET = "sk_test_hookproof_conformance"


def test_every_s_scenario_passes_under_the_sender_simulator() -> None:
    harness = SenderHarness(seed=11)

    async def go() -> dict[str, str]:
        outcomes = {}
        for scenario in CATALOGUE.tagged(Harness.S):
            result = await harness.run(scenario)
            outcomes[scenario.id] = result.outcome.value + (
                f": {result.message}" if result.message else ""
            )
        return outcomes

    outcomes = asyncio.run(go())
    assert outcomes == {s.id: "passed" for s in CATALOGUE.tagged(Harness.S)}


@pytest.mark.parametrize("scheme", ["standard", "stripe", "github"])
def test_every_r_scenario_passes_against_the_reference_receiver(
    tmp_path: Path, scheme: str
) -> None:
    secret = SECRET if scheme == "standard" else STRIPE_SECRET
    app = create_app(
        ReceiverSettings(
            secrets=[secret],
            db=str(tmp_path / "inbox.sqlite"),
            probe_token="probe-token",
            scheme=scheme,
            max_body=64 * 1024,
        )
    )
    settings = app_settings("probe-token", scheme=scheme, secrets=(secret,), max_body=64 * 1024)
    results = run_in_process(app, settings)
    assert set(results) == {s.id for s in CATALOGUE.tagged(Harness.R)}
    bad = {
        sid: (r.outcome.value, r.message, [f.observed for f in r.failures])
        for sid, r in results.items()
        if r.outcome not in (Outcome.PASSED, Outcome.SKIPPED)
    }
    assert bad == {}
    skipped = {sid for sid, r in results.items() if r.outcome is Outcome.SKIPPED}
    for sid in skipped:  # only scenarios that do not apply to the scheme are skipped
        assert scheme not in CATALOGUE.get(sid).schemes


def test_the_sender_store_gets_a_directory_only_when_a_step_edits_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sender-driven scenario keeps its store in memory (no mkdir/rmdir per scenario); only a
    scenario that edits the store's file gets a directory, and it is gone afterwards."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    harness = SenderHarness(seed=11)
    on_disk = [
        s
        for s in CATALOGUE.tagged(Harness.S)
        if any(step.action == "corrupt_payload" for step in s.steps)
    ]
    in_memory = [s for s in CATALOGUE.tagged(Harness.S) if s not in on_disk]
    assert on_disk
    assert in_memory
    made: list[str] = []
    real_mkdtemp = tempfile.mkdtemp

    def counting_mkdtemp(
        suffix: str | None = None, prefix: str | None = None, dir: str | None = None
    ) -> str:
        path = real_mkdtemp(suffix, prefix, dir)
        made.append(path)
        return path

    monkeypatch.setattr("tempfile.mkdtemp", counting_mkdtemp)

    async def go(scenarios: list[Scenario]) -> list[str]:
        return [(await harness.run(s)).outcome.value for s in scenarios]

    assert asyncio.run(go(in_memory[:6])) == ["passed"] * len(in_memory[:6])
    assert made == []
    assert asyncio.run(go(on_disk)) == ["passed"] * len(on_disk)
    assert len(made) == len(on_disk)
    assert list(tmp_path.iterdir()) == []
