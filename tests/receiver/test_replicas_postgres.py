"""Two receiver replicas (two ``hookproof receiver`` processes) sharing one PostgreSQL inbox.

What must hold across replicas, shown with real processes, real HTTP on loopback and the real
database: concurrent copies of one event sent to both replicas at the same moment produce exactly
one effect; every answer is a 2xx or a 503 with ``Retry-After``; ``kill -9`` of a replica mid-burst
loses no event it acknowledged and applies none twice; the claims it held are taken over by the
other replica once their lease expires.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg import sql

from tests.receiver.postgres_replicas import (
    PROBE_TOKEN,
    SECRET,
    Answer,
    Cluster,
    application_name,
    burst,
    client,
    cluster,
    deliver_until_2xx,
)

pytestmark = [pytest.mark.postgres, pytest.mark.subprocess]


def _check_answers(answers: list[Answer], *, dead: frozenset[str] = frozenset()) -> None:
    """Every answer is 2xx or a 503 with Retry-After; no answer only from a killed replica."""
    for answer in answers:
        if answer.status is None:
            assert answer.url in dead, answer
            continue
        assert answer.ok or (answer.status == 503 and answer.retry_after is not None), answer


def _exactly_one_effect(group: Cluster, event_ids: list[str]) -> None:
    reminders = group.reminders()
    assert {event_id: reminders.get(event_id, 0) for event_id in event_ids} == dict.fromkeys(
        event_ids, 1
    )
    records = group.records()
    for event_id in event_ids:
        state, _token, effects = records[event_id]
        assert (state, effects) == ("committed", 1), event_id


@pytest.fixture(scope="module")
def shared(postgres_dsn: str) -> Iterator[Cluster]:
    """One schema and two long-lived replicas for the whole module (process starts are slow);
    tests add the replicas they kill. Event ids never repeat across tests."""
    with cluster(postgres_dsn, lease_s=1) as group:
        group.start(application_name("a"))
        group.start(application_name("b"))
        yield group


def test_concurrent_copies_sent_to_both_replicas_have_exactly_one_effect(
    shared: Cluster,
) -> None:
    group = shared
    replicas = group.replicas[:2]
    urls = [group.url(process) for process in replicas]
    all_events: list[str] = []
    in_flight_answers = 0

    async def scenario() -> None:
        nonlocal in_flight_answers
        async with client() as http:
            for round_ in range(3):
                events = [f"evt_r{round_}_{n}" for n in range(25)]
                all_events.extend(events)
                answers = await burst(http, urls, events, copies=6)
                _check_answers(answers)
                assert any(a.ok for a in answers)
                in_flight_answers += sum(a.status == 503 for a in answers)
                # At most one effect per event, even before the retries.
                assert max(group.reminders().values()) == 1
                retried = await deliver_until_2xx(http, urls, events)
                _check_answers([a for answers in retried.values() for a in answers])

    asyncio.run(scenario())
    _exactly_one_effect(group, all_events)
    # The copies really met in flight (450 simultaneous copies: some found a live claim).
    assert in_flight_answers > 0
    for process in replicas:
        assert process.returncode is None, process.output()


def test_kill_9_mid_burst_loses_no_acknowledged_event_and_applies_none_twice(
    shared: Cluster,
) -> None:
    group = shared
    survivor = group.replicas[0]
    all_events: list[str] = []
    acknowledged: set[str] = set()
    victims_killed = 0

    async def one_round(http: httpx.AsyncClient, round_: int) -> None:
        nonlocal victims_killed
        victim = group.start(application_name(f"victim{round_}"))
        urls = [group.url(survivor), group.url(victim)]
        events = [f"evt_k{round_}_{n}" for n in range(40)]
        all_events.extend(events)
        baseline = await asyncio.to_thread(_committed, group)
        sending = asyncio.ensure_future(burst(http, urls, events, copies=4, concurrency=16))
        await _until(lambda: _committed(group) >= baseline + 3)
        victim.kill()  # SIGKILL mid-burst: no shutdown of any kind
        assert victim.returncode == -signal.SIGKILL
        victims_killed += 1
        answers = await sending
        _check_answers(answers, dead=frozenset({urls[1]}))
        assert any(a.status is None for a in answers), "the kill came after the burst"
        acknowledged.update(a.event_id for a in answers if a.ok)
        # Everything ever answered 2xx is committed, with one effect: nothing was lost.
        records, reminders = group.records(), group.reminders()
        for event_id in acknowledged:
            assert records[event_id][0] == "committed", event_id
            assert reminders.get(event_id) == 1, event_id
        assert max(reminders.values()) == 1

    async def scenario() -> None:
        async with client() as http:
            for round_ in range(3):
                await one_round(http, round_)
            # The sender retries everything on the survivor: the dead replica's claims
            # are taken over once their lease expires.
            retried = await deliver_until_2xx(http, [group.url(survivor)], all_events)
            _check_answers([a for answers in retried.values() for a in answers])

    asyncio.run(scenario())
    assert victims_killed == 3
    _exactly_one_effect(group, all_events)
    assert survivor.returncode is None, survivor.output()


def test_claims_held_by_a_killed_replica_are_taken_over_after_their_lease(
    shared: Cluster, postgres_dsn: str
) -> None:
    """Deterministic version: the victim's commits are stalled on a table lock, then it dies."""
    group = shared
    survivor = group.replicas[1]
    victim_name = application_name("victim")
    victim = group.start(victim_name)
    events = [f"evt_held{n}" for n in range(5)]
    with psycopg.connect(postgres_dsn) as locker:
        # Stall every effect write (hence every commit) while this transaction lives.
        locker.execute(
            sql.SQL("LOCK TABLE {}.hookproof_renewal_reminders IN EXCLUSIVE MODE").format(
                sql.Identifier(group.schema)
            )
        )

        async def stall_then_kill() -> list[Answer]:
            async with client() as http:
                sending = asyncio.ensure_future(burst(http, [group.url(victim)], events, copies=1))
                await _until(lambda: _in_flight(group, events) == len(events))
                victim.kill()
                return await sending

        answers = asyncio.run(stall_then_kill())
        assert [a.status for a in answers] == [None] * len(events)  # no answer at all
        locker.rollback()
    # The victim's open transactions die with their sessions: nothing committed.
    _until_sync(lambda: not _sessions(postgres_dsn, victim_name))
    records = group.records()
    assert {e: records[e] for e in events} == dict.fromkeys(events, ("in_flight", 1, 0))
    reminders = group.reminders()
    assert [reminders[e] for e in events if e in reminders] == []

    async def take_over() -> dict[str, list[Answer]]:
        async with client() as http:
            return await deliver_until_2xx(http, [group.url(survivor)], events)

    started = time.monotonic()
    retried = asyncio.run(take_over())
    _check_answers([a for answers in retried.values() for a in answers])
    records = group.records()
    for event_id in events:
        assert records[event_id] == ("committed", 2, 1), event_id  # token 2: taken over
    reminders = group.reminders()
    assert {e: reminders.get(e) for e in events} == dict.fromkeys(events, 1)
    assert time.monotonic() - started < 30
    assert survivor.returncode is None, survivor.output()


def _in_flight(group: Cluster, events: list[str]) -> int:
    records = group.records()
    return sum(1 for event_id in events if records.get(event_id, ("",))[0] == "in_flight")


def _sessions(dsn: str, name: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
        ).fetchone()
    return int(row[0]) if row else 0


def _committed(group: Cluster) -> int:
    return sum(1 for state, _, _ in group.records().values() if state == "committed")


async def _until(condition: Callable[[], bool], limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while not await asyncio.to_thread(condition):
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)  # real-time: the replicas work on their own schedule


def _until_sync(condition: Callable[[], bool], limit_s: float = 30.0) -> None:
    asyncio.run(_until(condition, limit_s))


def test_hookproof_check_passes_the_whole_catalogue_against_replicas_on_postgresql(
    shared: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from conformance.catalogue import CATALOGUE
    from conformance.cli import main
    from conformance.config import CheckSettings
    from conformance.model import Harness
    from conformance.session import plan
    from receiver.middleware import DEFAULT_MAX_BODY

    group = shared
    checked = group.replicas[0]  # replica b shares the inbox
    report = tmp_path / "report.json"
    code = main(
        [
            "check",
            group.url(checked),
            "--secret",
            SECRET,
            "--probe",
            f"{checked.base_url}/_hookproof/events",
            "--probe-token",
            PROBE_TOKEN,
            "--samples",
            "5",
            "--concurrency",
            "6",
            "--seed",
            "7",
            "--max-body",  # the replicas' limit (the receiver's default)
            str(DEFAULT_MAX_BODY),
            "--patience",
            "0",
            "--json",
            str(report),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    document = json.loads(report.read_text())
    expected = [s.id for s in plan(CheckSettings(), Harness.C)]  # the order a run takes
    assert [s["id"] for s in document["scenarios"]] == expected
    skipped = [s.id for s in CATALOGUE.tagged(Harness.C) if "standard" not in s.schemes]
    assert document["summary"]["passed"] == len(expected) - len(skipped), out
    # Effects were observed through the probe, i.e. counted in the PostgreSQL effect table.
    by_id = {s["id"]: s for s in document["scenarios"]}
    assert by_id["idempotency.sequential-duplicate"]["observed_by"] == "probe"
    assert max(group.reminders().values()) == 1
