"""The zoo's multi-process receiver: Node's ``cluster`` module forks three workers behind one port
and deals connections to them in turn (``node_cluster_receiver/cluster.js``, Node built-ins only).

A receiver that deduplicates in each worker's memory (a module-level ``Map``) passes every run of
one process, and applies an event twice in production the first time a retry reaches another
worker. hookproof sends every copy of an event it already acknowledged on a connection of its
own, as a retry from another of the sender's machines would, so that copy reaches another
worker; over one kept-alive connection (a client passed in, as in-process runs do) every copy
reaches the same worker and the bug passes. The variant with a shared inbox passes every
``must``. Skipped, saying why, where ``node`` is not installed.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.catalogue import CATALOGUE
from conformance.model import Harness, Severity
from conformance.results import Outcome
from tests.conformance.support import (
    broken_guarantees,
    check_zoo_variant,
    node_receiver_unavailable,
    other_schemes_only,
    zoo_env,
)
from tests.support.processes import ServerProcess, free_port

pytestmark = pytest.mark.subprocess

HERE = Path(__file__).resolve().parent / "node_cluster_receiver"
MAX_BODY = 4096
DUPLICATES = (
    "idempotency.sequential-duplicate",
    "idempotency.crash-after-send",
    "idempotency.redrive-duplicate",
    "idempotency.late-duplicate",
)
"""Scenarios that send one event again after its first copy was answered."""


@pytest.fixture(scope="module")
def cluster_server() -> Iterator[str]:
    reason = node_receiver_unavailable(HERE)
    if reason is not None:
        pytest.skip(reason)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="hookproof-cluster-") as data:
        env = zoo_env(port, MAX_BODY, WORKERS="3", DATA_DIR=data)
        base = f"http://127.0.0.1:{port}"
        ready = f"{base}/correct/_hookproof/events/x"
        with ServerProcess.start(
            ["node", "cluster.js"], env=env, cwd=HERE, ready_url=ready
        ) as server:
            try:
                yield base
            finally:
                server.kill_group()  # the workers go with the primary


def test_the_shared_inbox_breaks_no_guarantee_across_workers(cluster_server: str) -> None:
    results = check_zoo_variant(f"{cluster_server}", "correct", max_body=MAX_BODY)
    assert set(results) == {s.id for s in CATALOGUE.tagged(Harness.C)}
    assert broken_guarantees(results) == {}
    skipped = {sid for sid, r in results.items() if r.outcome is Outcome.SKIPPED}
    assert skipped == other_schemes_only()


def test_a_dedupe_in_each_workers_memory_applies_a_duplicate_twice(cluster_server: str) -> None:
    results = check_zoo_variant(
        cluster_server, "memory-dedupe", max_body=MAX_BODY, select=DUPLICATES
    )
    failed = {sid for sid, r in results.items() if r.outcome is Outcome.FAILED}
    # the connections are dealt in turn to three workers: of the four duplicates, each on a
    # connection of its own, at least two reach a worker that never saw the first copy
    assert len(failed) >= 2, {sid: r.outcome for sid, r in results.items()}
    for scenario_id in failed:
        assert results[scenario_id].severity is Severity.MUST
        assert "2 effect" in results[scenario_id].failures[0].observed


def test_over_one_kept_alive_connection_every_copy_reaches_the_same_worker(
    cluster_server: str,
) -> None:
    """What a run sees when every request shares the client's pool (the bug passes): the reason
    copies of an acknowledged event leave on connections of their own."""
    selected = ("idempotency.sequential-duplicate",)
    results = check_zoo_variant(
        cluster_server, "memory-dedupe", max_body=MAX_BODY, select=selected, one_connection=True
    )
    assert results["idempotency.sequential-duplicate"].outcome is Outcome.PASSED
