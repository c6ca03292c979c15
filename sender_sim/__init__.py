"""hookproof's sender simulator: the full sender state machine, as a library.

Leases with fencing tokens, retry with backoff and jitter, deadline-aware dead-lettering, a DLQ
with reasons, audited compare-and-set redrive, and a transition ledger that explains every
delivery. Depends on :mod:`receiver.signing` (the wire scheme) and httpx; never on the runner.

The façade (stable API; the CLI, the sandbox and the conformance runner use only this)::

    from sender_sim import (Simulator, SQLiteStore, VirtualClock, Policy, policy_named,
                            RedriveScope, FaultPlan, Fault, FaultKind)

    sim = Simulator(
        SQLiteStore(":memory:"),          # or SQLiteStore("sender.db"): WAL + synchronous=FULL
        clock=VirtualClock(start),        # simulation clock (scheduling); default RealClock()
        policy=policy_named("strict"),    # or "schedule", or Policy(...)/Policy().with_(...)
        client=httpx.AsyncClient(...),    # injected; ASGITransport / MockTransport / real HTTP
        seed=7,                           # jitter and generated ids replay exactly
        faults=FaultPlan.parse(["crash_after_send:attempts=1"], seed=7),
        wire_clock=None,                  # signature timestamps: real time by default
    )
    sim.add_endpoint("partner", "http://127.0.0.1:8000/webhooks", ["whsec_..."],
                     scheme="standard",   # "standard" | "stripe" | "github"
                     timeout=5.0, event_types=None, active=True)   # None: every event type
    sim.set_endpoint_active("partner", False, actor="ops@x")   # disabled: nothing automatic
    sim.delete_endpoint("partner", actor="ops@x")    # its deliveries go; setup history stays
    sim.endpoint_history("partner") -> list[EndpointChange]    # created/changed/.../deleted
    result = sim.publish_event(event_type="renewal.reminder", deadline_at=..., data={...},
                               business_key="ren_18427")  # fan-out to active subscribers
    result.event_id, result.delivery_ids, result.event_status  # None or an event-only status
    sim.resend([delivery_or_event_id, ...], actor="ops@x")    # -> ResendResult; raises
                              # ResendRefused (.code WEBHOOK_DELIVERY_NOT_REPLAYABLE, .ineligible)
    sim.rows(RowFilter(kind="delivery", status="dead_letter", http_class="5xx")) -> list[Row]
    sim.export_csv(RowFilter(business_key="ren_18427"), out)  # raises ExportTooLarge > 5000
    delivery_id = sim.publish(endpoint_id="partner", deadline_at=..., event_type="renewal.reminder",
                              data={...}, business_key="ren_18427",
                              event_id=None, body=None, first_attempt_at=None)
    ids = sim.publish_many([Publication(endpoint_id="partner", deadline_at=...), ...])  # one tx
    await sim.run_due()                          # one worker pass -> RunReport
    await sim.run_until_settled(delivery_ids=[delivery_id], until=None,
                                poll_interval=timedelta(0))   # jumps virtual time
    await sim.deliver(delivery_id)               # -> Delivery (delivered or dead_letter)
    sim.advance(timedelta(minutes=5)); sim.set_time(when)        # virtual clock only
    sim.dlq(reason="deadline_exhausted", business_key="ren_18427")  # -> list[Delivery]
    sim.redrive(actor="ops@x", reason="owner extended", deadline_at=...,
                scope=RedriveScope(business_key="ren_18427", reason="deadline_exhausted"))
                              # -> RedriveResult; raises RedriveIncomplete / RedriveRefused
    sim.explain(delivery_id) -> str; sim.metrics() -> MetricsSnapshot (.as_dict(), .render())
    sim.delivery(id), sim.event(id), sim.attempts(id), sim.ledger(id), sim.decisions()
    w2 = sim.worker("worker-2", clock_skew=timedelta(seconds=3))   # a second worker
    sim.set_faults(FaultPlan.parse(["lost_response"], seed=7))     # toggle faults at run time
    leases = w2.claim(); sent = [await w2.send(l) for l in leases]; w2.complete(sent)
    await sim.aclose()                           # closes the client only if it created it

The pure state machine lives in :mod:`sender_sim.transitions` (``new_delivery``, ``claim``,
``settle``, ``redrive``), policies in :mod:`sender_sim.policy`, classification profiles in
:mod:`sender_sim.classify`, faults in :mod:`sender_sim.faults`. Every error is a
:class:`SimulatorError` (see :mod:`sender_sim.exceptions`).
"""

from sender_sim.classify import (
    PROFILES,
    SCHEDULE,
    STRICT,
    Action,
    Outcome,
    Profile,
    StatusRule,
    Verdict,
    parse_retry_after,
    profile_named,
)
from sender_sim.clock import Clock, RealClock, SkewedClock, VirtualClock
from sender_sim.envelope import build_body, payload_digest
from sender_sim.exceptions import (
    ConfigurationError,
    ConflictError,
    ExportTooLarge,
    InvalidTime,
    InvalidTransition,
    NotFound,
    RedriveError,
    RedriveIncomplete,
    RedriveProblem,
    RedriveRefused,
    ResendRefused,
    SimulatorError,
    StoreError,
)
from sender_sim.faults import Fault, FaultInjector, FaultKind, FaultPlan
from sender_sim.inspection import EXPORT_LIMIT, Row, RowFilter, RowKind
from sender_sim.metrics import Cohort, MetricsSnapshot
from sender_sim.policy import (
    POLICIES,
    SEED_002_SCHEDULE,
    FixedSchedule,
    FullJitter,
    Policy,
    policy_named,
)
from sender_sim.records import (
    Attempt,
    DeadLetterReason,
    Delivery,
    Endpoint,
    EndpointChange,
    Event,
    EventStatus,
    LedgerRow,
    OutcomeKind,
    RedriveDecision,
    State,
    Versions,
    format_duration,
    rfc3339,
)
from sender_sim.redrive import MAX_BATCH, RedriveResult, RedriveScope
from sender_sim.resend import RESEND_WINDOW, ResendResult
from sender_sim.simulator import (
    EndpointConfig,
    EventPublication,
    Publication,
    PublishResult,
    Simulator,
)
from sender_sim.store import Change, DeliveryFilter, SQLiteStore
from sender_sim.worker import Lease, RunReport, Sent, Worker

__all__ = [
    "EXPORT_LIMIT",
    "MAX_BATCH",
    "POLICIES",
    "PROFILES",
    "RESEND_WINDOW",
    "SCHEDULE",
    "SEED_002_SCHEDULE",
    "STRICT",
    "Action",
    "Attempt",
    "Change",
    "Clock",
    "Cohort",
    "ConfigurationError",
    "ConflictError",
    "DeadLetterReason",
    "Delivery",
    "DeliveryFilter",
    "Endpoint",
    "EndpointChange",
    "EndpointConfig",
    "Event",
    "EventPublication",
    "EventStatus",
    "ExportTooLarge",
    "Fault",
    "FaultInjector",
    "FaultKind",
    "FaultPlan",
    "FixedSchedule",
    "FullJitter",
    "InvalidTime",
    "InvalidTransition",
    "Lease",
    "LedgerRow",
    "MetricsSnapshot",
    "NotFound",
    "Outcome",
    "OutcomeKind",
    "Policy",
    "Profile",
    "Publication",
    "PublishResult",
    "RealClock",
    "RedriveDecision",
    "RedriveError",
    "RedriveIncomplete",
    "RedriveProblem",
    "RedriveRefused",
    "RedriveResult",
    "RedriveScope",
    "ResendRefused",
    "ResendResult",
    "Row",
    "RowFilter",
    "RowKind",
    "RunReport",
    "SQLiteStore",
    "Sent",
    "Simulator",
    "SimulatorError",
    "SkewedClock",
    "State",
    "StatusRule",
    "StoreError",
    "Verdict",
    "Versions",
    "VirtualClock",
    "Worker",
    "build_body",
    "format_duration",
    "parse_retry_after",
    "payload_digest",
    "policy_named",
    "profile_named",
    "rfc3339",
]
