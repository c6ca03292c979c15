"""The receiver-side check catalogue: each expectation's ``check`` name maps to one function here.

A check reads a scenario's exchanges (and, for effects, the probe) and returns ``None`` when the
expectation holds, a :class:`~conformance.results.Failure` — expected, observed, reproduction —
when it is broken, or :class:`Unjudged` when it cannot be observed (no probe: judged by status
codes only). Checks never send a webhook; they only read evidence.
"""

from __future__ import annotations

import base64
import hmac
import math
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace

from conformance.causes import (
    ACKED_IN_FLIGHT,
    APPLIED_TWICE,
    BAD_INPUT_5XX,
    CLAIM,
    DEDUPE,
    EFFECT_AFTER_ANSWER,
    LATENCY,
    OTHER_SECRET,
    RATE_LIMITED,
    REDIRECTED,
    REFUSED_AUTHENTIC,
    REFUSED_THEN_MISSING,
    UNAPPLIED,
    UNAVAILABLE,
    VERIFY_FIRST,
)
from conformance.harnesses.exchanges import Exchange, seconds_text, spellings
from conformance.harnesses.state import WireRun
from conformance.model import Expectation
from conformance.probe import ProbeSnapshot
from conformance.results import Failure
from receiver.problems import media_type
from receiver.signing import SCHEMES

__all__ = [
    "RECEIVER_CHECKS",
    "Unjudged",
    "mark_cause",
    "status_matches",
    "unverified_duplicate",
]


@dataclass(frozen=True)
class Unjudged:
    """The expectation could not be observed in this run, and why."""

    reason: str


Verdict = Failure | Unjudged | None
CheckFn = Callable[[WireRun, Expectation], Awaitable[Verdict]]
RECEIVER_CHECKS: dict[str, CheckFn] = {}
"""Receiver-side checks by name."""


def check(name: str) -> Callable[[CheckFn], CheckFn]:
    def register(fn: CheckFn) -> CheckFn:
        RECEIVER_CHECKS[name] = fn
        return fn

    return register


def status_matches(exchange: Exchange, pattern: str) -> bool:
    """``2xx``/``4xx`` (a class), ``401`` (exact), ``503+retry-after`` (503 with the header)."""
    status = exchange.status
    if status is None:
        return False
    code, plus, requirement = pattern.partition("+")
    if plus and requirement == "retry-after" and "retry-after" not in exchange.headers:
        return False
    if code.endswith("xx"):
        return status // 100 == int(code[0])
    return status == int(code)


def _labelled(run: WireRun, expectation: Expectation) -> list[Exchange]:
    return run.exchanges.get(expectation.args["label"], [])


def _failure(
    run: WireRun,
    expectation: Expectation,
    exchanges: Iterable[Exchange],
    observed: str | None = None,
    expected: str | None = None,
) -> Failure:
    shown = list(exchanges)
    sensitive = run.redactions()
    observed_text = observed or "; ".join(e.describe(sensitive) for e in shown)
    reproduce = "\n".join(run.curl(e.request) for e in shown)
    return Failure(expected or expectation.describe(), observed_text, reproduce)


def _allowed(expectation: Expectation) -> tuple[str, ...]:
    return tuple(expectation.args["allowed"])


@check("status")
async def _status(run: WireRun, expectation: Expectation) -> Verdict:
    """Every answer to the labelled requests matches one of the allowed patterns."""
    exchanges = _labelled(run, expectation)
    allowed = _allowed(expectation)
    bad = [e for e in exchanges if not any(status_matches(e, p) for p in allowed)]
    if not exchanges:
        return Failure(expectation.describe(), "no request was sent", "")
    if bad:
        count = f"{len(bad)} of {len(exchanges)} answers: " if len(exchanges) > 1 else ""
        first = bad[0]
        failure = _failure(
            run,
            expectation,
            [first],
            observed=count + first.describe(run.redactions()),
            expected=f"{expectation.describe()} (allowed: {', '.join(allowed)})",
        )
        failure = mark_cause(run, failure, allowed, first)
        return failure if "2xx" in allowed else unverified_duplicate(run, failure, first)
    return None


@check("status_some")
async def _status_some(run: WireRun, expectation: Expectation) -> Verdict:
    """At least one answer to the labelled requests matches an allowed pattern."""
    exchanges = _labelled(run, expectation)
    allowed = _allowed(expectation)
    if any(status_matches(e, p) for e in exchanges for p in allowed):
        return None
    shown = exchanges[:3]
    observed = "; ".join(e.describe(run.redactions()) for e in shown)
    if len(exchanges) > len(shown):  # how many (over how long, for copies of one event)
        first, last = exchanges[0], exchanges[-1]
        over = ""
        if first.gap_s is not None and last.gap_s is not None:
            over = f" over {seconds_text(last.gap_s - first.gap_s + last.latency_s)}"
        observed = (
            f"none of {len(exchanges)} answers{over} is {' or '.join(allowed)}; "
            f"the first: {observed}"
        )
    failure = _failure(run, expectation, shown, observed)
    answer = shown[0] if shown else None
    if answer is not None and answer.status == 503:  # copies asked back until the deadline: an
        answer = None  # event stuck in flight (a lease that never ends), not an endpoint away
    return mark_cause(run, failure, allowed, answer)


def mark_cause(
    run: WireRun, failure: Failure, allowed: tuple[str, ...], answer: Exchange | None
) -> Failure:
    """``failure`` marked with the cause its ``answer`` shows (``allowed``: the answers the
    expectation takes; ``("2xx",)`` for an authentic delivery):

    - a redirect (nothing reached the handler; no sender follows it), a 429 (the run throttled)
      or nothing complete within ``--timeout`` (latency);
    - a 503: after copies of the event that were all refused, the id recorded before verifying
      (the refused copy left a claim); after a 2xx to one, or to an authentic delivery,
      unavailable (or the receiver's own in-flight answer, when the run shows it acknowledging
      events before committing them);
    - another 5xx to bad input (:data:`~conformance.causes.BAD_INPUT_5XX`);
    - an authentic delivery refused: signed with another of the run's secrets
      (:data:`~conformance.causes.OTHER_SECRET`), a committed duplicate refused (dedupe), else
      refused-authentic — folded together when the plainest delivery is refused too."""
    if answer is None:
        return replace(failure, cause=REFUSED_AUTHENTIC) if allowed == ("2xx",) else failure
    if answer.redirected:
        return replace(failure, cause=REDIRECTED)
    if answer.status == 429:
        return replace(failure, cause=RATE_LIMITED)
    if answer.late:  # nothing complete within --timeout: a slow (or serialised) handler
        return replace(failure, cause=LATENCY)
    earlier = _earlier_copies(run, answer)
    if answer.status == 503:
        if earlier and all(status_matches(e, "4xx") for e in earlier):
            return replace(failure, cause=VERIFY_FIRST)  # the refused copy left a claim
        if any(status_matches(e, "2xx") for e in earlier) or allowed == ("2xx",):
            return replace(failure, cause=UNAVAILABLE)
        return failure
    if allowed != ("2xx",):
        five_xx = answer.status is not None and answer.status >= 500
        return replace(failure, cause=BAD_INPUT_5XX) if five_xx else failure
    name = run.options.scheme.signature_header.lower()
    signatures = {value for key, value in answer.request.headers if key.lower() == name}
    if signatures & run.other_secret_signatures:
        return replace(failure, cause=OTHER_SECRET)
    if status_matches(answer, "4xx") and any(status_matches(e, "2xx") for e in earlier):
        return replace(failure, cause=DEDUPE)  # a committed duplicate refused (409, say)
    return replace(failure, cause=REFUSED_AUTHENTIC)


def _earlier_copies(run: WireRun, copy: Exchange) -> list[Exchange]:
    """The copies of ``copy``'s event sent before it in this run."""
    if copy.gap_s is None or not copy.event_id:
        return []
    return [
        e
        for group in run.exchanges.values()
        for e in group
        if e.event_id == copy.event_id and (e.gap_s is None or e.gap_s < copy.gap_s)
    ]


def unverified_duplicate(run: WireRun, failure: Failure, copy: Exchange) -> Failure:
    """``failure`` (bad input that ``copy`` answered), marked :data:`VERIFY_FIRST` when
    ``copy`` was answered 2xx as a copy of an event whose every earlier copy was refused: the
    receiver recorded the id from a copy it refused, so this one is "a duplicate"."""
    earlier = _earlier_copies(run, copy)
    if failure.cause or not earlier or not status_matches(copy, "2xx"):
        return failure
    if any(status_matches(e, "2xx") for e in earlier):
        return failure
    return replace(failure, cause=VERIFY_FIRST)


async def _probe_failure(
    run: WireRun,
    expectation: Expectation,
    event_label: str,
    observed: str,
    snapshot: ProbeSnapshot | None = None,
    wanted: int = 0,
) -> Failure:
    """The failure of a probe reading (``snapshot``, described by ``observed``; ``wanted``: the
    effects the check expected), with every copy of the event sent and its answer. After a 2xx,
    a reading that misses the effect (``in_flight``, or no effect at all) names its cause: the
    copies before the 2xx were all refused — :data:`~conformance.causes.REFUSED_THEN_MISSING`
    (the refused copy's record made the genuine one "a duplicate", unless the run shows another
    reason); ``in_flight`` after the first
    copy's 2xx — :data:`~conformance.causes.ACKED_IN_FLIGHT` (answered before any commit);
    ``in_flight`` after a later copy's — :data:`~conformance.causes.CLAIM` (a copy in flight
    answered 2xx); no effect of a committed or unknown event —
    :data:`~conformance.causes.UNAPPLIED` (which leads the report when the plainest delivery
    shows it: the generic event acknowledged and dropped)."""
    event = run.events[event_label]
    sent = [e for group in run.exchanges.values() for e in group if e.event_id == event.event_id]
    assert run.options.probe is not None
    lines = [run.curl(e.request) for e in sent]
    lines.append(run.options.probe.curl(event.event_id, show_secrets=run.options.show_secrets))
    sensitive = run.redactions()
    cause = ""
    acknowledged = next((e for e in sent if status_matches(e, "2xx")), None)
    if snapshot is not None and acknowledged is not None:
        before = sent[: sent.index(acknowledged)]
        in_flight = snapshot.status == "in_flight"
        missing = in_flight or (wanted > 0 and snapshot.effects == 0)
        if missing and before and all(status_matches(e, "4xx") for e in before):
            cause = REFUSED_THEN_MISSING  # the refused copy's record made it "a duplicate"?
        elif in_flight and not before:
            observed += ", after a 2xx: acknowledged before it was committed"
            cause = ACKED_IN_FLIGHT
        elif in_flight:  # a later copy answered 2xx while an earlier one was in flight
            cause = CLAIM
        elif missing:
            cause = UNAPPLIED
    answers = "; ".join(e.describe(sensitive) for e in sent[:6])
    more = f" (+{len(sent) - 6} more)" if len(sent) > 6 else ""
    shown = f"{observed}; answers: {answers}{more}" if sent else observed
    return Failure(expectation.describe(), shown, "\n".join(lines), cause=cause)


async def _missing_effect(
    run: WireRun, expectation: Expectation, label: str, snapshot: ProbeSnapshot, wanted: int
) -> Failure:
    """The failure of a committed event short of ``wanted`` effects. The probe is followed for a
    moment (:meth:`~conformance.harnesses.state.WireRun.effect_shown_after`): an effect that
    shows then was applied after the answer, the cause the failure names (so a receiver that
    acknowledges before its effect gets one line to fix, not one per family)."""
    event_id = run.events[label].event_id
    later = await run.effect_shown_after(event_id, wanted)
    said = snapshot.describe()
    if later is None:
        return await _probe_failure(run, expectation, label, said, snapshot, wanted)
    advice = (
        f"more than --settle {run.options.settle:g} s after it"
        if run.options.settle > 0
        else "from a durable queue? then say so with --settle"
    )
    said += (
        f"; the effect showed {later * 1000:.0f} ms later: it is applied after the answer "
        f"({advice})"
    )
    failure = await _probe_failure(run, expectation, label, said)
    return replace(failure, cause=EFFECT_AFTER_ANSWER)


def _probe_count(field: str, unjudged: str, *, settles: bool) -> CheckFn:
    """A check that the probe shows exactly ``equals`` (or at most ``at_most``) of ``field``
    (``effects``, ``deliveries``) for the event. With ``settles`` (effects), a committed event's
    effects may show after its answer (:mod:`conformance.harnesses.settling`)."""

    async def judge(run: WireRun, expectation: Expectation) -> Verdict:
        if run.options.probe is None:
            return Unjudged(unjudged)
        label = expectation.args["event"]
        event = run.events.get(label)
        if event is None:
            return Failure(expectation.describe(), f"event {label!r} was never sent", "")
        args = expectation.args
        wanted = 0 if "at_most" in args else int(args["equals"])
        snapshot = await (
            run.read_probe(event.event_id, at_least=wanted, confirm=True)
            if settles
            else run.read_probe(event.event_id)
        )
        count: int = getattr(snapshot, field)
        wrong = count > int(args["at_most"]) if "at_most" in args else count != wanted
        if wrong and settles and snapshot.status == "committed" and count < wanted:
            return await _missing_effect(run, expectation, label, snapshot, wanted)
        if wrong:
            expected = wanted if field == "effects" else 0
            failure = await _probe_failure(
                run, expectation, label, snapshot.describe(), snapshot, expected
            )
            allowed = int(args["at_most"]) if "at_most" in args else wanted
            # applied again, not applied at all where it should have been refused
            twice = field == "effects" and count > allowed >= 1 and not failure.cause
            return replace(failure, cause=APPLIED_TWICE) if twice else failure
        return None

    judge.__doc__ = f"The probe shows exactly ``equals`` (or at most ``at_most``) {field}."
    return judge


check("effects")(
    _probe_count(
        "effects", "no probe: effects not observed, judged by status codes only", settles=True
    )
)
check("deliveries")(  # copies of other events were not counted under its id
    _probe_count(
        "deliveries",
        "no probe: deliveries not observed, judged by status codes only",
        settles=False,
    )
)


@check("committed")
async def _committed(run: WireRun, expectation: Expectation) -> Verdict:
    """Right after a 2xx, the probe shows the event committed with its effect (with
    ``--settle``: the effect may follow within it, for a receiver whose durable queue applies
    it). A failure says whether the effect showed later."""
    if run.options.probe is None:
        return Unjudged("no probe: commit not observed")
    label = expectation.args["event"]
    snapshot = await run.read_probe(run.events[label].event_id, at_least=1)
    if snapshot.status == "committed" and snapshot.effects < 1:
        return await _missing_effect(run, expectation, label, snapshot, 1)
    if snapshot.status != "committed":
        return await _probe_failure(run, expectation, label, snapshot.describe(), snapshot, 1)
    return None


@check("latency")
async def _latency(run: WireRun, expectation: Expectation) -> Verdict:
    """The ``quantile`` of the labelled latencies (no answer counts as infinite) is under the
    timeout."""
    exchanges = _labelled(run, expectation)
    if not exchanges:
        return Failure(expectation.describe(), "no request was sent", "")
    latencies = sorted(e.latency_s if e.answered else math.inf for e in exchanges)
    quantile = float(expectation.args.get("quantile", 0.99))
    index = min(len(latencies) - 1, math.ceil(quantile * len(latencies)) - 1)
    observed = latencies[index]
    timeout = run.options.timeout
    if observed < timeout:
        return None
    slowest = max(exchanges, key=lambda e: e.latency_s if e.answered else math.inf)
    shown = "no answer" if math.isinf(observed) else f"{observed * 1000:.0f} ms"
    return _failure(
        run,
        expectation,
        [slowest],
        observed=f"p{quantile * 100:g} over {len(exchanges)} deliveries: {shown}",
        expected=f"{expectation.describe()} ({timeout:g} s)",
    )


@check("problem_json")
async def _problem_json(run: WireRun, expectation: Expectation) -> Verdict:
    """Every 4xx answer is ``application/problem+json``."""
    for exchange in _labelled(run, expectation):
        if exchange.status is not None and 400 <= exchange.status < 500:
            media = media_type(exchange.headers.get("content-type", ""))
            if media != "application/problem+json":
                observed = f"{exchange.status} with content-type {media or '(none)'!r}"
                failure = _failure(run, expectation, [exchange], observed=observed)
                return mark_cause(run, failure, (), exchange)  # a gateway's 429 page, say
    return None


def _leak_candidates(run: WireRun, exchange: Exchange) -> set[str]:
    """The secrets, the signatures sent, and the signatures a receiver would compute: the HMAC,
    under each secret, of every scheme's signed content for this request (a receiver may
    compute another scheme's by mistake), base64 and hex."""
    wire = run.options.scheme
    scheme = wire.scheme
    request = exchange.request
    headers = {name: value.decode("latin-1") for name, value in request.headers}
    event_id = scheme.event_id(headers, request.body)
    stamp = scheme.timestamp_of(headers)
    contents = [
        other.signed_content(request.body, event_id=event_id, timestamp=stamp or 0)
        for other in SCHEMES.values()
        if stamp is not None or not other.uses_timestamp
    ]
    found = set(scheme.secret_texts(wire.secrets))
    for secret in wire.secrets:
        key = scheme.key(secret)
        found.add(base64.b64encode(key).decode())
        for signed in contents:
            digest = hmac.digest(key, signed, "sha256")
            found.update({base64.b64encode(digest).decode(), digest.hex()})
    found.update(run.sensitive)
    return {value for value in found if len(value) >= 8}


@check("no_leak")
async def _no_leak(run: WireRun, expectation: Expectation) -> Verdict:
    """No answer body or header contains a secret or a signature (sent or expected)."""
    for exchange in _labelled(run, expectation):
        text = exchange.body + " " + " ".join(exchange.headers.values())
        candidates = _leak_candidates(run, exchange)
        if any(form in text for candidate in candidates for form in spellings(candidate)):
            return _failure(
                run,
                expectation,
                [exchange],
                observed=f"{exchange.status}: the answer contains a secret or a signature "
                "(not shown)",
            )
    return None


def _standing_alone(text: str) -> re.Pattern[str]:
    """``text`` not inside a longer run of base64 characters (the secret "…cret" is not named
    by the word "secret")."""
    return re.compile(rf"(?<![A-Za-z0-9+/]){re.escape(text)}(?![A-Za-z0-9+/=])")


@check("no_secret_part")
async def _no_secret_part(run: WireRun, expectation: Expectation) -> Verdict:
    """No answer names the last four characters of one of the run's secrets (standing alone,
    not inside a longer word), unless the request itself carried them."""
    named = [_standing_alone(secret.value[-4:]) for secret in run.options.scheme.secrets]
    for exchange in _labelled(run, expectation):
        request = exchange.request
        sent = " ".join(v.decode("latin-1") for _, v in request.headers)
        sent += " " + request.body.decode("latin-1")
        text = exchange.body + " " + " ".join(exchange.headers.values())
        for suffix in named:
            if suffix.search(text) and not suffix.search(sent):
                return _failure(
                    run,
                    expectation,
                    [exchange],
                    observed=f"{exchange.status}: the answer names the last four characters of "
                    "the secret (not shown)",
                )
    return None


@check("effects_every")
async def _effects_every(run: WireRun, expectation: Expectation) -> Verdict:
    """Every event whose label starts with ``prefix`` shows exactly ``equals`` effects."""
    if run.options.probe is None:
        return Unjudged("no probe: effects not observed, judged by status codes only")
    prefix = str(expectation.args["prefix"])
    labels = [label for label in run.events if label.startswith(prefix)]
    if not labels:
        return Failure(expectation.describe(), f"no event {prefix!r}… was sent", "")
    wanted = int(expectation.args["equals"])
    for label in labels:
        snapshot = await run.read_probe(run.events[label].event_id, at_least=wanted, confirm=True)
        if snapshot.status == "committed" and snapshot.effects < wanted:
            return await _missing_effect(run, expectation, label, snapshot, wanted)
        if snapshot.effects != wanted:
            failure = await _probe_failure(
                run, expectation, label, snapshot.describe(), snapshot, wanted
            )
            twice = snapshot.effects > wanted >= 1 and not failure.cause
            return replace(failure, cause=APPLIED_TWICE) if twice else failure
    return None


@check("committed_when_acknowledged")
async def _committed_when_acknowledged(run: WireRun, expectation: Expectation) -> Verdict:
    """Every 2xx to a copy sent while the first copy was in flight was matched, at that moment,
    by ``committed`` with an effect on the probe (the readings the staggered step took). A
    receiver allowed to apply effects after its answers (``--settle``;
    :mod:`conformance.harnesses.settling`) owes a copy in flight no more than it owes a lone new
    event: ``committed``; the scenario's effects check reads the effect later."""
    if run.options.probe is None:
        return Unjudged("no probe: what a 2xx to an in-flight copy acknowledged is not observed")
    applies_late = run.options.settle > 0
    label = expectation.args["label"]
    for exchange, snapshot in run.observations.get(label, []):
        if snapshot.status == "committed" and snapshot.effects < 1 and applies_late:
            continue
        if snapshot.status != "committed" or snapshot.effects < 1:
            sensitive = run.redactions()
            failure = Failure(
                expectation.describe(),
                f"a copy sent while the first was in flight got {exchange.describe(sensitive)}; "
                f"right then, {snapshot.describe()}",
                run.curl(exchange.request),
            )
            if (
                snapshot.status != "committed"
                or (await run.read_probe(snapshot.event_id)).effects < 1
            ):
                return failure
            return replace(  # the effect showed since: that 2xx came before it
                failure,
                observed=f"{failure.observed}; the effect showed later",
                cause=EFFECT_AFTER_ANSWER,
            )
    return None
