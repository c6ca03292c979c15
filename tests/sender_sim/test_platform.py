"""The simulator as a platform: endpoints with subscriptions, fan-out, event-only statuses,
deletion with its setup history, resend (after a 2xx too), the monitor's rows and the CSV export
with its cap, versions on every row, and signed timestamps that never repeat for a delivery."""

from __future__ import annotations

import asyncio
import csv
import io
from datetime import timedelta

import httpx
import pytest

from receiver.signing import Secret, Verifier
from sender_sim import (
    EventStatus,
    ExportTooLarge,
    ResendRefused,
    RowFilter,
    RowKind,
    Simulator,
    State,
)
from sender_sim.envelope import ENVELOPE_SCHEMA_VERSION
from sender_sim.inspection import EXPORT_LIMIT
from sender_sim.worker import WORKER_VERSION
from tests.sender_sim.conftest import SECRET, T0, URL, MakeSim, always

DEADLINE = T0 + timedelta(hours=2)


@pytest.fixture
def make_bare(make_sim: MakeSim) -> MakeSim:
    """``make_sim`` without its default endpoint: each test configures its own."""

    def make(*args: object, **kwargs: object) -> Simulator:
        sim = make_sim(*args, **kwargs)
        sim.delete_endpoint("partner", actor="test")
        return sim

    return make


def _recording(status: int = 200) -> tuple[list[httpx.Request], httpx.MockTransport]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status)

    return seen, httpx.MockTransport(handler)


def test_publishing_fans_out_to_active_subscribed_endpoints_only(make_bare: MakeSim) -> None:
    sim = make_bare()
    sim.add_endpoint("a", URL + "/a", [SECRET])
    sim.add_endpoint("b", URL + "/b", [SECRET], event_types=["renewal.reminder"])
    sim.add_endpoint("c", URL + "/c", [SECRET], event_types=["invoice.paid"])
    sim.add_endpoint("d", URL + "/d", [SECRET], active=False)
    result = sim.publish_event(event_type="renewal.reminder", deadline_at=DEADLINE)
    assert result.event_status is None
    assert sorted(sim.delivery(i).endpoint_id for i in result.delivery_ids) == ["a", "b"]
    assert {sim.delivery(i).event_id for i in result.delivery_ids} == {result.event_id}
    # an endpoint configured later never joins the event's automatic deliveries
    sim.add_endpoint("e", URL + "/e", [SECRET])
    asyncio.run(sim.run_until_settled())
    assert [d.endpoint_id for d in sim.deliveries()] == ["a", "b"]


@pytest.mark.parametrize(
    ("setup", "status"),
    [
        ([], EventStatus.NO_ENDPOINT),
        ([("a", True, None)], None),
        ([("a", False, None)], EventStatus.ENDPOINT_DISABLED),
        ([("a", True, ["other"])], EventStatus.NOT_SUBSCRIBED),
    ],
)
def test_event_only_statuses_fabricate_nothing(
    make_bare: MakeSim, setup: list[tuple[str, bool, list[str] | None]], status: EventStatus | None
) -> None:
    sim = make_bare()
    for endpoint_id, active, types in setup:
        sim.add_endpoint(endpoint_id, URL, [SECRET], active=active, event_types=types)
    result = sim.publish_event(event_type="t", deadline_at=DEADLINE)
    assert result.event_status is status
    if status is None:
        assert len(result.delivery_ids) == 1
        return
    assert result.delivery_ids == ()
    assert sim.deliveries() == []
    [row] = sim.rows()
    assert (row.kind, row.status, row.delivery, row.http_class) == (
        RowKind.EVENT,
        status.value,
        None,
        None,
    )


def test_deleting_an_endpoint_keeps_only_its_setup_history(make_bare: MakeSim) -> None:
    sim = make_bare()
    sim.add_endpoint("a", URL, [SECRET], actor="alice")
    sim.add_endpoint("a", URL + "/v2", [SECRET], timeout=2.5, actor="bob")
    sim.set_endpoint_active("a", False, actor="carol")
    sim.set_endpoint_active("a", True, actor="carol")
    result = sim.publish_event(event_type="t", deadline_at=DEADLINE)
    asyncio.run(sim.run_until_settled())
    assert sim.delete_endpoint("a", actor="dave") == 1
    assert sim.deliveries() == []
    assert sim.store.attempts(result.delivery_ids[0]) == []
    [row] = sim.rows()
    assert row.status == EventStatus.HISTORY_UNAVAILABLE.value
    history = sim.endpoint_history("a")
    assert [(h.action, h.actor) for h in history] == [
        ("created", "alice"),
        ("changed", "bob"),
        ("disabled", "carol"),
        ("enabled", "carol"),
        ("deleted", "dave"),
    ]
    assert history[1].before is not None
    assert history[1].after is not None
    assert (history[1].before["url"], history[1].after["url"]) == (URL, URL + "/v2")
    assert history[1].after["timeout_s"] == 2.5
    assert history[-1].after is None
    assert SECRET not in repr(history)
    with pytest.raises(ResendRefused):
        sim.resend(result.delivery_ids, actor="ops")  # the delivery is gone


def test_resend_after_a_2xx_is_a_new_real_attempt_with_a_fresh_signature(
    make_bare: MakeSim,
) -> None:
    seen, transport = _recording(200)
    sim = make_bare(client=httpx.AsyncClient(transport=transport))
    sim.add_endpoint("a", URL, [SECRET])
    [did] = sim.publish_event(event_type="t", deadline_at=DEADLINE).delivery_ids
    asyncio.run(sim.deliver(did))
    result = sim.resend([did], actor="ops")
    assert result.delivery_ids == (did,)
    after = sim.delivery(did)
    assert (after.state, after.attempt, after.resends) == (State.SCHEDULED, 1, 1)
    asyncio.run(sim.deliver(did))
    final = sim.delivery(did)
    assert (final.state, final.attempt) == (State.DELIVERED, 2)
    first, second = seen
    assert first.content == second.content
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert first.headers["webhook-timestamp"] != second.headers["webhook-timestamp"]
    assert first.headers["webhook-signature"] != second.headers["webhook-signature"]
    verifier = Verifier([Secret(SECRET)], tolerance=10**9)
    for request in seen:
        verifier.verify(request.content, dict(request.headers))


def test_resend_past_the_limit_gets_one_attempt_and_no_new_budget(make_bare: MakeSim) -> None:
    sim = make_bare(always(500))
    sim.policy = sim.policy.with_(max_attempts=2)
    sim.add_endpoint("a", URL, [SECRET])
    [did] = sim.publish_event(event_type="t", deadline_at=DEADLINE).delivery_ids
    asyncio.run(sim.deliver(did))
    assert sim.delivery(did).attempt == 2
    sim.resend([did], actor="ops")
    asyncio.run(sim.deliver(did))
    final = sim.delivery(did)
    assert (final.state, final.attempt, final.max_attempts) == (State.DEAD_LETTER, 3, 3)


def test_resend_is_atomic_and_refuses_pending_work(make_bare: MakeSim) -> None:
    sim = make_bare()
    sim.add_endpoint("a", URL, [SECRET])
    [done] = sim.publish_event(event_type="t", deadline_at=DEADLINE).delivery_ids
    asyncio.run(sim.deliver(done))
    [pending] = sim.publish_event(event_type="t", deadline_at=DEADLINE).delivery_ids
    with pytest.raises(ResendRefused) as refused:
        sim.resend([done, pending, "nope"], actor="ops")
    assert refused.value.code == "WEBHOOK_DELIVERY_NOT_REPLAYABLE"
    assert refused.value.ineligible == {pending: "pending", "nope": "not_found"}
    assert sim.delivery(done).state is State.DELIVERED  # nothing was queued
    with pytest.raises(ResendRefused):
        sim.resend([f"x{i}" for i in range(101)], actor="ops")


def test_an_event_only_event_is_resent_to_todays_subscribers(make_bare: MakeSim) -> None:
    sim = make_bare()
    result = sim.publish_event(event_type="t", deadline_at=DEADLINE)
    assert result.event_status is EventStatus.NO_ENDPOINT
    with pytest.raises(ResendRefused) as refused:
        sim.resend([result.event_id], actor="ops")
    assert "no_active_subscriber" in refused.value.ineligible[result.event_id]
    sim.add_endpoint("a", URL, [SECRET])
    sim.add_endpoint("b", URL + "/b", [SECRET], event_types=["other"])
    queued = sim.resend([result.event_id], actor="ops")
    [did] = queued.new_delivery_ids
    assert sim.delivery(did).endpoint_id == "a"
    asyncio.run(sim.deliver(did))
    [row] = sim.rows()
    assert (row.kind, row.status, row.http_class) == (RowKind.DELIVERY, "delivered", "2xx")
    assert sim.event(result.event_id).status is None


def test_rows_filter_by_every_field(make_bare: MakeSim) -> None:
    answers = iter([200, 503, 503, 503, 503, 503, 503, 503, 503, 503])
    sim = make_bare(lambda r: httpx.Response(next(answers)))
    sim.add_endpoint("a", URL, [SECRET])
    ok = sim.publish_event(event_type="t", deadline_at=DEADLINE, business_key="k1")
    asyncio.run(sim.run_until_settled())
    sim.advance(timedelta(minutes=10))
    bad = sim.publish_event(event_type="t", deadline_at=sim.now() + timedelta(minutes=30))
    asyncio.run(sim.run_until_settled())
    sim.set_endpoint_active("a", False)
    skipped = sim.publish_event(event_type="t", deadline_at=DEADLINE)

    def ids(**where: object) -> list[str]:
        return [r.event.event_id for r in sim.rows(RowFilter(**where))]  # type: ignore[arg-type]

    assert ids() == [ok.event_id, bad.event_id, skipped.event_id]
    assert ids(kind="event") == [skipped.event_id]
    assert ids(kind="delivery") == [ok.event_id, bad.event_id]
    assert ids(http_class="2xx") == [ok.event_id]
    assert ids(http_class="5xx", status="dead_letter") == [bad.event_id]
    assert ids(status="endpoint_disabled") == [skipped.event_id]
    assert ids(business_key="k1") == [ok.event_id]
    assert ids(endpoint_id="a") == [ok.event_id, bad.event_id]
    assert ids(event_from=T0 + timedelta(minutes=5)) == [bad.event_id, skipped.event_id]
    assert ids(delivered_to=T0 + timedelta(minutes=5)) == [ok.event_id]


def test_export_writes_the_filtered_rows_and_refuses_more_than_the_cap(
    make_bare: MakeSim,
) -> None:
    sim = make_bare()
    for n in range(3):
        sim.publish_event(event_type="t", deadline_at=DEADLINE, data={"n": n})
    out = io.StringIO()
    assert sim.export_csv(RowFilter(kind="event"), out) == 3
    parsed = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert [r["status"] for r in parsed] == ["no_endpoint"] * 3
    assert next(r["data"] for r in parsed).startswith("{")
    for n in range(EXPORT_LIMIT - 2):
        sim.publish_event(event_type="t", deadline_at=DEADLINE, data={"n": n})
    untouched = io.StringIO()
    with pytest.raises(ExportTooLarge) as refused:
        sim.export_csv(None, untouched)
    assert (refused.value.code, refused.value.count) == ("EXPORT_TOO_LARGE", EXPORT_LIMIT + 1)
    assert untouched.getvalue() == ""


def test_every_row_and_attempt_records_the_three_versions(make_bare: MakeSim) -> None:
    sim = make_bare()
    sim.add_endpoint("a", URL, [SECRET])
    [did] = sim.publish_event(event_type="t", deadline_at=DEADLINE).delivery_ids
    asyncio.run(sim.deliver(did))
    rows = sim.ledger(did)
    [attempt] = sim.attempts(did)
    for versions in [r.versions for r in rows] + [attempt.versions]:
        assert versions is not None
        assert versions.policy == sim.policy.version
        assert versions.envelope == ENVELOPE_SCHEMA_VERSION
        assert versions.worker == WORKER_VERSION
    assert sim.policy.version != sim.policy.with_(max_attempts=3).version


def test_attempts_within_one_wall_second_get_distinct_timestamps(make_bare: MakeSim) -> None:
    seen, transport = _recording(503)
    sim = make_bare(client=httpx.AsyncClient(transport=transport))
    sim.add_endpoint("a", URL, [SECRET])
    [did] = sim.publish_event(event_type="t", deadline_at=DEADLINE).delivery_ids
    asyncio.run(sim.deliver(did))
    stamps = [int(r.headers["webhook-timestamp"]) for r in seen]
    assert len(stamps) > 2
    assert stamps == sorted(set(stamps))


def test_an_ack_after_its_endpoint_was_deleted_writes_nothing(make_bare: MakeSim) -> None:
    sim = make_bare()
    sim.add_endpoint("a", URL, [SECRET])
    [did] = sim.publish_event(event_type="t", deadline_at=DEADLINE).delivery_ids
    worker = sim.worker("w")
    [lease] = worker.claim()
    sent = asyncio.run(worker.send(lease))
    sim.delete_endpoint("a", actor="ops")
    assert worker.complete([sent]) == [False]
    assert sim.store.attempts(did) == []
    assert sim.store.ledger(did) == []
