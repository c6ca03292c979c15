"""The sandbox engine driven by method calls, and its interactive shell fed line by line, against a
scripted receiver on a real loopback port."""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sender_sim import (
    RealClock,
    RedriveIncomplete,
    RedriveRefused,
    Simulator,
    SQLiteStore,
    State,
    VirtualClock,
)
from sender_sim.exceptions import ConfigurationError, NotFound
from sender_sim.sandbox.engine import FAULT_NAMES, SandboxEngine, SandboxEvent
from sender_sim.sandbox.templates import load_templates
from sender_sim.sandbox.terminal import COMMANDS, SandboxShell, interact
from tests.sender_sim.test_cli_support import SECRET, ScriptedReceiver

T0 = datetime(2026, 8, 13, 9, 0, tzinfo=UTC)
_WORDS = [
    "publish",
    "list",
    "dlq",
    "explain",
    "redrive",
    "faults",
    "fault",
    "on",
    "off",
    "help",
    "templates",
    "quit",
    "del_",
    "--actor",
    "--reason",
    "--deadline",
    "+1h",
    "x=1",
    "'",
    '"',
    "crash_after_send",
    "permanent_response",
    "business_key=k",
    "deadline=soon",
    "data.a=[",
]

pytestmark = pytest.mark.anyio


class Harness:
    """An engine over a fresh in-memory store and a virtual clock, recording its events."""

    def __init__(self, url: str, *, clock: VirtualClock | RealClock | None = None) -> None:
        self.client = httpx.AsyncClient()
        self.sim = Simulator(
            SQLiteStore(":memory:"), clock=clock or VirtualClock(T0), client=self.client
        )
        self.sim.add_endpoint("app", url, [SECRET])
        self.engine = SandboxEngine(self.sim, endpoint_id="app")
        self.events: list[SandboxEvent] = []
        self.engine.subscribe(self.events.append)

    def texts(self, kind: str | None = None) -> list[str]:
        return [e.text for e in self.events if kind is None or e.kind == kind]

    def causes(self, delivery_id: str) -> list[str]:
        return [
            e.row.cause for e in self.events if e.row is not None and e.delivery_id == delivery_id
        ]

    async def close(self) -> None:
        await self.client.aclose()
        self.sim.store.close()


@pytest.fixture
async def harness(receiver: ScriptedReceiver) -> AsyncIterator[Harness]:
    made = Harness(receiver.url)
    yield made
    await made.close()


# -- engine ------------------------------------------------------------------------------------


async def test_publish_reports_each_row_as_it_is_written(
    harness: Harness, receiver: ScriptedReceiver
) -> None:
    delivery_id = harness.engine.publish("renewal.reminder")
    assert harness.causes(delivery_id) == ["published"]
    assert harness.events[0].kind == "published"
    assert "business key ren_1" in harness.events[0].text
    await harness.engine.pump()
    assert harness.causes(delivery_id) == ["published", "leased", "delivered"]
    assert harness.sim.delivery(delivery_id).state is State.DELIVERED
    body = json.loads(receiver.received[0].body)
    assert body["type"] == "renewal.reminder"
    assert body["data"]["renewal_id"] == "ren_1"
    assert receiver.received[0].verified
    await harness.engine.pump()  # nothing pending: nothing new reported
    assert harness.causes(delivery_id) == ["published", "leased", "delivered"]


async def test_publish_fields_key_deadline_and_unknown_types(harness: Harness) -> None:
    engine = harness.engine
    first = engine.publish("invoice.paid", {"amount": 5}, deadline="+2h")
    delivery = harness.sim.delivery(first)
    assert delivery.business_key == "in_1"
    assert delivery.deadline_at == T0 + timedelta(hours=2)
    event = json.loads(harness.sim.event(delivery.event_id).body)
    assert event["data"] == {"invoice_id": "in_1", "amount": 5, "currency": "eur"}
    second = engine.publish("partner.custom", {"x": 1}, business_key="k1")
    assert harness.sim.delivery(second).business_key == "k1"
    third = engine.publish()
    assert harness.sim.event(harness.sim.delivery(third).event_id).type == "renewal.reminder"
    assert harness.sim.delivery(third).deadline_at == T0 + timedelta(hours=24)
    with pytest.raises(ConfigurationError, match="deadline"):
        engine.publish(deadline="soon")


async def test_unsubscribe_stops_the_events(harness: Harness) -> None:
    seen: list[SandboxEvent] = []
    unsubscribe = harness.engine.subscribe(seen.append)
    harness.engine.publish()
    unsubscribe()
    unsubscribe()
    harness.engine.publish()
    assert [e.kind for e in seen] == ["published", "row"]


async def test_faults_toggle_and_fire(harness: Harness, receiver: ScriptedReceiver) -> None:
    engine = harness.engine
    assert set(engine.faults()) == set(FAULT_NAMES)
    assert not any(engine.faults().values())
    engine.fault_on("crash_after_send:attempts=1")
    assert engine.faults()["crash_after_send"] == "crash_after_send:attempts=1"
    delivery_id = engine.publish()
    await engine.pump()
    causes = harness.causes(delivery_id)
    assert "fault:crash_after_send" in causes
    assert "lease_taken_over" in causes
    assert causes[-1] == "delivered"
    assert len(receiver.received) == 2  # the crash lost the ack; the takeover resent
    engine.fault_off("crash_after_send")
    engine.fault_off("crash_after_send")
    assert engine.faults()["crash_after_send"] is None
    other = engine.publish()
    await engine.pump()
    assert harness.causes(other) == ["published", "leased", "delivered"]
    assert harness.texts("fault") == [
        "fault ON: crash_after_send:attempts=1",
        "fault OFF: crash_after_send",
        "fault OFF: crash_after_send",
    ]
    with pytest.raises(ConfigurationError, match="unknown fault"):
        engine.fault_on("gremlins")
    with pytest.raises(ConfigurationError, match="unknown fault"):
        engine.fault_off("gremlins")


async def test_wrong_secret_fault_dead_letters_as_authentication(harness: Harness) -> None:
    harness.engine.fault_on("wrong_secret")
    delivery_id = harness.engine.publish()
    await harness.engine.pump()
    delivery = harness.sim.delivery(delivery_id)
    assert delivery.state is State.DEAD_LETTER
    assert delivery.reason is not None
    assert delivery.reason.value == "authentication_policy"


async def test_dlq_summary_redrive_and_double_redrive(
    harness: Harness, receiver: ScriptedReceiver
) -> None:
    engine = harness.engine
    receiver.statuses = [410, 410, 200]
    gone = [engine.publish("renewal.reminder"), engine.publish("invoice.paid")]
    await engine.pump()
    assert engine.dlq_summary() == {"permanent_response": {"ren_1": 1, "in_2": 1}}
    assert [d.delivery_id for d in engine.dlq(business_key="in_2")] == [gone[1]]
    assert engine.dlq(reason="deadline_exhausted") == []
    result = engine.redrive([gone[0]], actor="ops@x", reason="fixed", deadline="+1h")
    assert result.delivery_ids == (gone[0],)
    await engine.kick()
    assert harness.sim.delivery(gone[0]).state is State.DELIVERED
    assert harness.causes(gone[0])[-3:] == ["redriven", "leased", "delivered"]
    assert harness.texts("redrive")[0].startswith("redrive decision 1 by ops@x: queued")
    with pytest.raises(RedriveRefused):
        engine.redrive([gone[0]], actor="ops@x", reason="again", deadline="+1h")
    assert "not a dead letter" in harness.texts("refused")[0]
    with pytest.raises(RedriveIncomplete):
        engine.redrive([gone[1]], actor="ops@x", reason="r", deadline=" ")
    with pytest.raises(RedriveIncomplete):
        engine.redrive([gone[1]], actor="", reason="r", deadline="+1h")
    with pytest.raises(RedriveIncomplete):
        engine.redrive([], actor="a", reason="r", deadline="+1h")
    assert engine.dlq_summary() == {"permanent_response": {"in_2": 1}}


async def test_ids_resolve_by_unique_prefix(harness: Harness) -> None:
    delivery_id = harness.engine.publish()
    assert harness.engine.resolve(delivery_id) == delivery_id
    assert harness.engine.resolve(delivery_id[:10]) == delivery_id
    with pytest.raises(NotFound):
        harness.engine.resolve("del_")  # too short to guess
    for suffix in "xy":  # "q" is no hex digit: no generated id shares their prefix
        harness.sim.publish(
            endpoint_id="app", deadline_at=T0 + timedelta(hours=1), delivery_id=f"del_qqq{suffix}"
        )
    with pytest.raises(NotFound, match="matches 2 deliveries"):
        harness.engine.resolve("del_qq")
    assert harness.engine.resolve("del_qqqy") == "del_qqqy"
    with pytest.raises(NotFound, match="no delivery"):
        harness.engine.resolve("del_zzzzzz")
    assert "Story:" in harness.engine.explain(delivery_id[:12])


async def test_a_new_engine_picks_up_pending_work_without_replaying_it(harness: Harness) -> None:
    delivery_id = harness.engine.publish()
    later = SandboxEngine(harness.sim, endpoint_id="app")
    seen: list[SandboxEvent] = []
    later.subscribe(seen.append)
    await later.pump()
    assert [e.row.cause for e in seen if e.row] == ["leased", "delivered"]
    assert harness.sim.delivery(delivery_id).state is State.DELIVERED


async def test_the_engine_needs_a_configured_endpoint(harness: Harness) -> None:
    with pytest.raises(NotFound):
        SandboxEngine(harness.sim, endpoint_id="nowhere")
    with pytest.raises(ConfigurationError):
        SandboxEngine(harness.sim, endpoint_id="app", deadline=timedelta(0))


async def test_the_live_loop_delivers_in_real_time(receiver: ScriptedReceiver) -> None:
    live = Harness(receiver.url, clock=RealClock())
    delivered = asyncio.Event()

    def watch(event: SandboxEvent) -> None:
        if event.row is not None and event.row.cause == "delivered":
            delivered.set()

    live.engine.subscribe(watch)
    runner = asyncio.create_task(live.engine.run())
    try:
        delivery_id = live.engine.publish()
        await live.engine.kick()
        await asyncio.wait_for(delivered.wait(), 10)
    finally:
        live.engine.stop()
        await asyncio.wait_for(runner, 10)
        await live.close()
    assert live.causes(delivery_id) == ["published", "leased", "delivered"]


async def test_errors_in_the_loop_are_reported_not_raised(harness: Harness) -> None:
    harness.engine.publish()
    harness.sim.store.close()  # the store goes away under the engine
    assert await harness.engine.pump_reporting_errors() is None
    assert harness.texts("error")[0].startswith("error: ")
    harness.sim.store = SQLiteStore(":memory:")


# -- templates ---------------------------------------------------------------------------------


def test_template_files_add_types_and_pick_the_default(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(
        json.dumps(
            {
                "default": "order.shipped",
                "templates": {
                    "order.shipped": {
                        "business_key": "order_id",
                        "data": {"order_id": "ord_{n}", "items": [{"sku": "s{n}"}]},
                    }
                },
            }
        )
    )
    templates = load_templates(str(path))
    assert templates.default == "order.shipped"
    assert "renewal.reminder" in templates.names()
    template = templates.get(None)
    data = template.render(3)
    assert data == {"order_id": "ord_3", "items": [{"sku": "s3"}]}
    assert template.key_of(data) == "ord_3"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not valid JSON"),
        ("[]", "'templates' object"),
        ('{"templates": {"a": []}}', "must be a JSON object"),
        ('{"templates": {"a": {"data": 1}}}', "must be an object"),
        ('{"templates": {"a": {"business_key": 1}}}', "business_key"),
        ('{"templates": {"a": {"colour": "red"}}}', "unknown keys colour"),
        ('{"templates": {"a": {}}, "default": "b"}', "default 'b'"),
        ('{"templates": {" ": {}}}', "must not be empty"),
    ],
)
def test_bad_template_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(content)
    with pytest.raises(ConfigurationError, match=message):
        load_templates(str(path))
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_templates(str(tmp_path / "missing.json"))


# -- the shell ---------------------------------------------------------------------------------


async def _transcript(harness: Harness, *lines: str) -> list[str]:
    out: list[str] = []
    harness.engine.subscribe(lambda event: out.append(event.text))
    shell = SandboxShell(harness.engine, out.append)

    async def feed() -> AsyncIterator[str]:
        for line in lines:
            out.append(f"> {line}")
            yield line

    await interact(shell, feed())
    return out


async def test_the_shell_runs_every_command(harness: Harness, receiver: ScriptedReceiver) -> None:
    receiver.statuses = [200, 410, 200]
    out = await _transcript(
        harness,
        "help",
        "templates",
        "list",
        "dlq",
        "publish renewal.reminder renewal_id=ren_18427 plan=pro",
        "publish invoice.paid business_key=acct_9 deadline=+2h data.deadline=soon",
        "list",
        "dlq permanent_response",
        "dlq business_key=acct_9",
        "faults",
        "fault on lost_response:attempts=1",
        "fault off lost_response",
        "",
        "quit",
        "list",  # never reached
    )
    text = "\n".join(out)
    for _, usage, _ in COMMANDS:
        assert usage in text
    assert "renewal.reminder (default): business key: renewal_id;" in text
    assert "no deliveries yet; try: publish" in text
    assert "the dead-letter queue is empty" in text
    assert "business key ren_18427" in text
    assert "leased -> delivered" in text
    assert "business key acct_9" in text
    assert "dead letter (permanent_response)" in text
    assert "  permanent_response: 1 (acct_9: 1)" in text
    assert "fault ON: lost_response:attempts=1" in text
    assert "fault OFF: lost_response" in text
    assert "  crash_after_send         off      the worker sends, then dies" in text
    assert out[-1] == "> quit"
    invoice = harness.engine.dlq()[0]
    event = json.loads(harness.sim.event(invoice.event_id).body)
    assert event["data"]["deadline"] == "soon"
    assert invoice.deadline_at == T0 + timedelta(hours=2)


async def test_the_shell_explains_and_redrives(
    harness: Harness, receiver: ScriptedReceiver
) -> None:
    receiver.statuses = [410, 200]
    delivery_id = harness.engine.publish()
    await harness.engine.pump()
    prefix = delivery_id[:12]
    out = await _transcript(
        harness,
        f"explain {prefix}",
        f"redrive {prefix} --actor ops@example.com --reason 'receiver fixed' --deadline +1h",
        f"redrive {prefix} --actor=ops@example.com --reason=again --deadline=+1h",
    )
    text = "\n".join(out)
    assert f"Delivery {delivery_id}" in text
    assert "redrive decision 1 by ops@example.com: queued" in text
    assert "redriven" not in text.split("redrive decision 1", 1)[0]
    assert "REDRIVE by ops@example.com" in text
    assert "leased -> delivered" in text
    assert "redrive refused (decision 2)" in text
    assert harness.sim.delivery(delivery_id).state is State.DELIVERED


async def test_the_shell_resends_all_or_none(harness: Harness, receiver: ScriptedReceiver) -> None:
    done = harness.engine.publish("invoice.paid")
    await harness.engine.pump()
    pending = harness.engine.publish("invoice.paid")  # not pumped: still scheduled
    out = await _transcript(
        harness,
        f"resend {done},{pending} --actor ops@example.com",
        f"resend {done[:12]} --actor=ops@example.com",
        "resend --actor ops",
    )
    text = "\n".join(out)
    # the library's refusal (Simulator.resend): its code, message and reason
    assert f"WEBHOOK_DELIVERY_NOT_REPLAYABLE: nothing was queued; {pending}: pending" in text
    (line,) = [t for t in out if t.startswith("resend by ops@example.com:")]
    assert line == f"resend by ops@example.com: {done} queued {done}"  # the prefix resolved
    assert "RESEND requested by ops@example.com" in text
    resent = harness.sim.delivery(done)  # one more attempt of the same delivery
    assert (resent.state, resent.attempt, resent.resends) == (State.DELIVERED, 2, 1)
    assert "error: usage: resend ID[,ID…] --actor A (missing ID)" in text
    assert harness.sim.delivery(pending).state is State.DELIVERED  # the pump ran it meanwhile


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("bogus", "error: unknown command 'bogus'; type help"),
        ("publish 'unclosed", "error: No closing quotation"),
        ("publish x novalue", "error: 'novalue' is not key=value"),
        ("explain", "error: usage: explain ID"),
        ("explain del_nothing_here", "error: no delivery 'del_nothing_here'"),
        ("redrive", "error: usage: redrive ID[,ID…] --actor A --reason R --deadline D"),
        ("redrive x --actor", "error: --actor needs a value"),
        ("redrive x --color red", "error: unknown redrive option --color"),
        ("fault", "error: usage: fault on|off NAME[:k=v,…]"),
        ("fault on gremlins", "error: unknown fault 'gremlins'"),
        ("fault on lost_response:p=7", "error: a fault probability must be between 0 and 1"),
        ("dlq bored", "error: dlq takes one reason out of"),
        ("dlq colour=red", "error: dlq filters by REASON and business_key=KEY"),
    ],
)
async def test_bad_lines_are_one_error_line(harness: Harness, line: str, message: str) -> None:
    out = await _transcript(harness, line, "help")
    assert out[1].startswith(message), out
    assert out[2] == "> help"  # the shell goes on


async def test_deliveries_are_listed_newest_first(harness: Harness) -> None:
    published = [harness.engine.publish() for _ in range(4)]  # same virtual instant
    assert [d.delivery_id for d in harness.engine.deliveries()] == published[::-1]
    assert len(harness.engine.deliveries(limit=2)) == 2


async def test_template_numbers_continue_across_sessions(harness: Harness) -> None:
    harness.engine.publish()
    later = SandboxEngine(harness.sim, endpoint_id="app")
    delivery_id = later.publish()
    assert harness.sim.delivery(delivery_id).business_key == "ren_2"


@given(st.text(max_size=80) | st.lists(st.sampled_from(_WORDS), max_size=6).map(" ".join))
def test_the_shell_survives_any_line(line: str) -> None:
    """Whatever is typed, the shell answers (or quits) and never raises."""

    async def once() -> bool:
        receiver = ScriptedReceiver([200, 410])
        transport = httpx.ASGITransport(app=receiver.app())
        async with httpx.AsyncClient(transport=transport) as client:
            sim = Simulator(SQLiteStore(":memory:"), clock=VirtualClock(T0), client=client)
            sim.add_endpoint("app", "http://127.0.0.1/webhooks", [SECRET])
            engine = SandboxEngine(sim, endpoint_id="app")
            engine.publish()
            await engine.pump()
            out: list[str] = []
            result = await SandboxShell(engine, out.append).execute(line)
            sim.store.close()
            return result

    keep_going = asyncio.run(once())
    try:
        words = shlex.split(line)
    except ValueError:
        words = []
    assert keep_going is (not words or words[0].lower() not in ("quit", "exit"))


async def test_unexpected_errors_keep_the_loop_alive(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken() -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(harness.engine, "pump", broken)
    assert await harness.engine.pump_reporting_errors() is None
    assert harness.texts("error") == ["error: unexpected RuntimeError: boom"]
