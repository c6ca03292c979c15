"""Failures grouped by their likely cause, each cause with a one-line fix.

Several failed scenarios often share one bug: a receiver that deduplicates on the body fails half
the idempotency family. :func:`group_by_cause` folds a run's failures into causes (``deduplicate on
webhook-id, not on the body — 6 scenarios``) so the report starts with what to fix. A failure may
name its cause (``Failure.cause``, e.g. a refusal code that differs from the convention); otherwise
the scenario's id picks it from :data:`SCENARIO_CAUSES` (``fnmatch`` patterns, first match wins),
and a scenario no pattern covers is its own cause: its guarantee. A narrow cause folds into a
broader one the same run shows (:data:`FOLDS_INTO`: a dedupe that forgets late duplicates is a
retention bug, unless the receiver does not deduplicate at all).

One cause outranks the others: when the plainest authentic delivery (``signature.valid``) is not
acknowledged at all, most of the catalogue fails with it — a wrong secret, scheme, path or event
type, not thirty bugs. Every scenario whose own authentic delivery was refused then folds into
:data:`REFUSED_AUTHENTIC`, whose fix quotes the receiver's answer. The same goes for a plainest
delivery answered 2xx that the probe shows without any effect (:data:`UNAPPLIED`: an event type
the receiver skips, a dedupe key that collapses events): every event acknowledged and dropped
folds into it. So does a receiver whose
effects show only after its answer (:data:`EFFECT_AFTER_ANSWER`, named by the failures whose
missing effect showed a moment later): every "applied once" check of the run fails with it, and
one that answers 2xx before it commits at all (:data:`ACKED_IN_FLIGHT`, named by the failures
whose probe still showed the event in flight after its 2xx): its 503s to the copies that follow
are its own in-flight answers, so :data:`UNAVAILABLE` folds into it. And
an endpoint that answers with a redirect (:data:`REDIRECTED`: a URL moved to ``https://`` or to
a trailing slash) fails every scenario whose answer was a 3xx for that one reason, since no
webhook sender follows a redirect: its fix quotes the first such answer, ``Location`` included.
So does one that throttles the run (:data:`RATE_LIMITED`: a 429 from a gateway's rate limit in
front of a correct receiver), whose fix is a lower ``--rate-limit``, and one that answers 503 to
deliveries it must accept (:data:`UNAVAILABLE`: nginx's ``limit_req`` answers 503, as does a
receiver whose store is away).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from conformance.model import Severity
from conformance.results import Outcome, ScenarioResult

__all__ = [
    "ACKED_IN_FLIGHT",
    "CAUSES",
    "CLAIM",
    "DEDUPE",
    "EFFECT_AFTER_ANSWER",
    "FOLDS_INTO",
    "LATENCY",
    "PLAINEST",
    "RATE_LIMITED",
    "REDIRECTED",
    "REFUSED_AUTHENTIC",
    "REFUSED_THEN_MISSING",
    "SCENARIO_CAUSES",
    "UNAPPLIED",
    "UNAVAILABLE",
    "VERIFY_FIRST",
    "Cause",
    "cause_of",
    "group_by_cause",
]

REDIRECTED = "redirect"
"""The cause key of a failure whose answer was a redirect (3xx): nothing reached the handler."""
RATE_LIMITED = "rate-limited"
"""The cause key of a failure whose answer was 429: the endpoint, or a gateway in front of it,
throttled the run (a sender retries such an answer; the run's scenarios cannot)."""
UNAVAILABLE = "unavailable"
"""The cause key of a delivery the receiver must accept, answered 503: a gateway shedding load or
throttling (nginx's ``limit_req`` answers 503), or the receiver's store away."""
_RUN_WIDE = (REDIRECTED, RATE_LIMITED, UNAVAILABLE)
"""Causes that explain every failure of a scenario they appear in: nothing reached the handler."""
EFFECT_AFTER_ANSWER = "effect-after-answer"
"""The cause key of a missing effect that showed a moment later: applied after the 2xx."""
ACKED_IN_FLIGHT = "acknowledged-in-flight"
"""The cause key of an event the probe still showed in flight after the receiver answered it 2xx:
acknowledged before anything was committed (a background task, a queue that is not durable)."""
REFUSED_THEN_MISSING = "refused-then-missing"
"""The marker of a genuine copy acknowledged after refused copies of its event, whose effect
the probe then misses: see :data:`FOLDS_INTO`."""
VERIFY_FIRST = "verify-first"
"""The cause key of a receiver that records an event id before verifying it: a refused copy
poisons the id (the genuine copy that follows is taken for a duplicate)."""
REFUSED_AUTHENTIC = "refused-authentic"
"""The cause key of a failure where a delivery that must be acknowledged (2xx) was not."""
BAD_INPUT_5XX = "bad-input-5xx"
"""The marker of bad input answered with a 5xx (not 503): the scenario's own cause when that one
says "never a 5xx", else :data:`PARSE` (a verification error left unguarded is a parsing bug,
not an ordering or comparison one)."""
APPLIED_TWICE = "applied-twice"
"""The marker of an event the probe shows applied more often than allowed: the scenario's own
cause in the idempotency family, else ``dedupe`` (a body variant's copies applied twice)."""
OTHER_SECRET = "refused-other-secret"
"""The marker of an authentic delivery signed with another secret than the first, refused: when
``signature.each-secret`` fails too, the receiver tries only some of its secrets."""
PARSE = "parse"
DEDUPE = "dedupe"
ROTATION = "signature-list"
CLAIM = "in-flight"
LATENCY = "latency"
UNAPPLIED = "acknowledged-unapplied"
"""The cause key of a failure where an event answered 2xx shows no effect at all on the probe:
when the plainest delivery shows it, the receiver acknowledges the generic event and drops it."""
EACH_SECRET = "signature.each-secret"
"""The scenario whose failure makes :data:`OTHER_SECRET` point at the signature list."""
PLAINEST = "signature.valid"
"""The scenario whose refusal (or acknowledged, unapplied delivery) makes
:data:`REFUSED_AUTHENTIC` (or :data:`UNAPPLIED`) the run's leading cause."""
_PLAINEST_CAUSES = (REFUSED_AUTHENTIC, UNAPPLIED)
"""Causes that fold the rest of the run when the plainest delivery fails with them."""

CAUSES: Mapping[str, str] = {
    "convention": "answer refusals with the codes the platform expects, or declare the codes "
    "your sender relies on in [answers] (a convention, not a broken guarantee)",
    "verify": "verify the signature over the raw body with every active secret before acting on "
    "a delivery",
    PARSE: "guard header and body parsing: malformed input is a 4xx, never a 5xx",
    "ijson": "take a string JSON allows but UTF-8 cannot hold (a lone surrogate escape) "
    "without a 5xx, parsing it and storing it (PostgreSQL's jsonb, a UTF-8 text column): "
    "accept it or refuse it with a 4xx, and apply it at most once",
    "parse-unverified": "verify the raw body before reading it, or read an unverified body "
    "defensively: JSON of any shape or depth (null, a list, wrong field types, 2,000 levels) "
    "is a 4xx, never a 5xx",
    "compare": "compare the whole signature, exactly, in constant time (hmac.compare_digest, "
    "crypto.timingSafeEqual after a length check): never a prefix of it, never ignoring case",
    "event-id": "refuse a delivery without a usable event id (400): it could never be deduplicated",
    ROTATION: "try every entry of the signature header against every active secret, "
    "skipping unknown versions",
    "raw-bytes": "verify the exact bytes received, never re-serialized JSON or text decoded and "
    "re-encoded with another charset",
    "storable": "store every string valid JSON can hold: a \\u0000 escape is valid, and "
    "PostgreSQL's text and jsonb refuse U+0000 (keep the raw body as bytea, or map U+0000 before "
    "storing); never a 5xx on every retry of a genuine event",
    "media-type": "compare the Content-Type's media type alone: application/json; "
    "charset=utf-8 is JSON (Stripe sends it so)",
    "header-case": "look header names up case-insensitively (Webhook-Id is webhook-id)",
    "repeated": "refuse a webhook header sent twice with different values (400), or verify and "
    "deduplicate on the same one value",
    VERIFY_FIRST: "verify (signature and timestamp) before recording the event id: a refused "
    "copy leaves no trace, so the genuine copy that follows is accepted and applied once",
    "tolerance": "accept timestamps within the whole tolerance, in both directions",
    "stale": "refuse timestamps outside the tolerance in both directions, before the dedupe lookup",
    DEDUPE: "deduplicate on the event id (webhook-id; a Stripe event's id; X-GitHub-Delivery) "
    "in a durable inbox, not on the body or a business object's id, and answer a committed "
    "duplicate 2xx",
    "retention": "keep each event id's dedupe record durably for as long as the sender may "
    "retry or redrive (days), not in a cache of recent ids or a record that expires in seconds",
    CLAIM: "claim the event id atomically and hold the claim until the commit (a lease "
    "shorter than the handler's work lets a copy in); answer a copy that arrives "
    "mid-processing 503 with Retry-After",
    "hang-up": "finish (or wholly undo) a delivery whose sender hung up: do not tie the "
    "handler's work to the connection (a cancelled request context, an aborted handler) once "
    "the event id is recorded, and commit the id with its effect in one transaction",
    "ack": "acknowledge the generic event with 2xx only after committing it",
    LATENCY: "answer within the sender's timeout: commit, acknowledge, then do slow work",
    "problem": "answer refusals with application/problem+json",
    "leak": "never echo a secret or a signature in an answer",
    "error-text": "answer a refused delivery with your own words, not the verification "
    "library's error message (stripe-node's names the length and last four characters of "
    "your secret when the signature header describes another one)",
    "size": "accept bodies up to the limit you declare (a framework's default limit may be "
    "lower: raise it), and refuse larger ones with 413",
    "sender": "the sender breaks its retry contract (see each scenario's guarantee)",
    EFFECT_AFTER_ANSWER: "apply the effect before answering 2xx, committed with the inbox "
    "record in one transaction (the probe showed it only after the answer); if a durable queue "
    "applies it, tell hookproof with --settle",
    ACKED_IN_FLIGHT: "answer 2xx only after the event id and its effect are committed: the "
    "probe still showed an acknowledged event in flight (a background task or a queue in "
    "memory answered for it, or it was taken for a duplicate of another event: a dedupe key "
    "that is not the event id); the copies that follow then get 503, in flight",
    REDIRECTED: "serve webhooks at this URL itself, or give hookproof and your sender the URL "
    "it redirects to: webhook senders (Stripe's, Svix's, Standard Webhooks') never follow a "
    "redirect, so every delivery to it fails",
    RATE_LIMITED: "the endpoint (or a gateway in front of it) throttled the run with 429: rerun "
    "with --rate-limit N, a request rate under its limit (real senders retry a 429 later; these "
    "scenarios judge the answer they get)",
    UNAVAILABLE: "the endpoint answered 503 to deliveries it must accept: a gateway throttling "
    "or shedding load (nginx's limit_req answers 503) or the receiver's store away; rerun with "
    "--rate-limit N under the limit, or make the store available (other causes below may follow "
    "from it)",
    REFUSED_AUTHENTIC: "acknowledge a correctly signed delivery: check that the receiver holds "
    "the secret you pass (--secret), verifies the --scheme you chose at this URL and accepts "
    "the event (--event-template)",
    UNAPPLIED: "apply the events you acknowledge: the generic event was answered 2xx but the "
    "probe shows no effect of it (an event type the receiver skips? then give "
    "--event-template an event it handles; a dedupe key that is not the event id?)",
}
"""Every known cause and its one-line fix."""

SCENARIO_CAUSES: tuple[tuple[str, str], ...] = (
    ("signature.valid", "ack"),
    ("signature.tampered-body", "verify"),
    ("signature.wrong-secret", "verify"),
    ("signature.missing-*", "parse"),
    ("signature.id-less-event", "event-id"),
    ("signature.malformed-unsigned-id", "event-id"),
    ("signature.malformed-*", "parse"),
    ("signature.wrong-length-entry", "parse"),
    ("signature.body-not-ijson", "ijson"),
    ("signature.body-not-*", "parse"),
    ("signature.body-odd-json", "parse-unverified"),
    ("signature.truncated-signature", "compare"),
    ("signature.case-swapped", "compare"),
    ("signature.rotation", ROTATION),
    ("signature.unknown-version", ROTATION),
    ("signature.list-positions", ROTATION),
    ("signature.each-secret", ROTATION),
    ("signature.*-then-genuine", VERIFY_FIRST),
    ("clock.stale-then-genuine", VERIFY_FIRST),
    ("signature.raw-bytes", "raw-bytes"),
    ("signature.utf8-body", "raw-bytes"),
    ("signature.nul-escape", "storable"),
    ("signature.repeated-headers", "repeated"),
    ("signature.header-name-case", "header-case"),
    ("signature.content-type-charset", "media-type"),
    ("clock.*-inside", "tolerance"),
    ("clock.*", "stale"),
    ("idempotency.in-flight-*", "in-flight"),
    ("idempotency.concurrent-*", "in-flight"),
    ("idempotency.staggered-duplicates", "in-flight"),
    ("idempotency.sender-hung-up", "hang-up"),
    ("idempotency.late-duplicate", "retention"),
    ("idempotency.redrive-duplicate", "retention"),  # on the wire: sent after --patience
    ("idempotency.double-redrive", "retention"),
    ("idempotency.duplicate-after-other-events", "retention"),
    ("idempotency.*", "dedupe"),
    ("response.within-timeout", "latency"),
    ("response.ack-after-commit", "ack"),
    ("response.problem-details", "problem"),
    ("response.no-secret-leak", "leak"),
    ("response.no-secret-hint", "error-text"),
    ("size.*", "size"),
    ("story.*", "dedupe"),
    ("deadline.*", "sender"),
    ("classification.*", "sender"),
    ("leases.*", "sender"),
    ("redrive.*", "sender"),
    ("schedules.*", "sender"),
)
"""Which cause a failed scenario points at, by id pattern (first match wins)."""


@dataclass(frozen=True)
class Cause:
    """One likely cause, its fix, and the scenarios that point at it (in run order)."""

    key: str
    fix: str
    scenarios: tuple[str, ...]

    @property
    def line(self) -> str:
        count = len(self.scenarios)
        return f"{self.fix} — {count} scenario{'' if count == 1 else 's'}"


def cause_of(
    result: ScenarioResult, *, plainest: str | None = None, rotation_broken: bool = False
) -> tuple[str, str]:
    """The cause key and fix a failed ``result`` points at; ``plainest``: the cause the run's
    plainest authentic delivery failed with (:data:`REFUSED_AUTHENTIC`, :data:`UNAPPLIED`), so
    a failure of ``result`` with that cause points there; ``rotation_broken``: the run's
    ``signature.each-secret`` failed, so a refusal of another secret's delivery points there."""
    causes = [f.cause for f in result.failures]
    for run_wide in _RUN_WIDE:  # nothing of this scenario reached the handler
        if run_wide in causes:
            return run_wide, CAUSES[run_wide]
    if ACKED_IN_FLIGHT in causes:  # its 503s and refusals follow from the early 2xx
        return ACKED_IN_FLIGHT, CAUSES[ACKED_IN_FLIGHT]
    if plainest is not None and plainest in causes:
        return plainest, CAUSES[plainest]
    if plainest == REFUSED_AUTHENTIC and OTHER_SECRET in causes:  # refused, whichever secret
        return REFUSED_AUTHENTIC, CAUSES[REFUSED_AUTHENTIC]
    if rotation_broken and OTHER_SECRET in causes:
        return ROTATION, CAUSES[ROTATION]
    own = _scenario_cause(result.scenario.id)
    for marker, (kept, otherwise) in _MARKERS.items():
        if marker in causes:
            key = kept.get(own or "", otherwise)
            return key, CAUSES[key]
    named = [cause for cause in causes if cause and cause not in _UNNAMED]
    # a result with a broken guarantee points at it, not at the convention it also broke
    if named and len(named) == len(result.failures):
        return named[0], CAUSES.get(named[0], named[0])
    if own is not None:
        return own, CAUSES[own]
    return result.scenario.id, result.scenario.guarantee


def _scenario_cause(scenario_id: str) -> str | None:
    """The cause :data:`SCENARIO_CAUSES` gives ``scenario_id`` (first match), if any."""
    for pattern, key in SCENARIO_CAUSES:
        if fnmatch.fnmatchcase(scenario_id, pattern):
            return key
    return None


_MARKERS: Mapping[str, tuple[Mapping[str, str], str]] = {
    BAD_INPUT_5XX: ({k: k for k in (PARSE, "parse-unverified", "ijson", "storable")}, PARSE),
    # a second effect after the sender hung up: the claim let the retry in
    APPLIED_TWICE: (
        {"in-flight": "in-flight", "hang-up": "in-flight", "retention": "retention"},
        "dedupe",
    ),
}
"""What a failure marked so points at, by the scenario's own cause (a marker says what was
seen; the scenario's cause may say it better), else the second."""
_UNNAMED = frozenset({*_PLAINEST_CAUSES, OTHER_SECRET})
"""Markers that name a cause only when the run shows it (see :func:`cause_of`)."""


def group_by_cause(results: Iterable[ScenarioResult]) -> list[Cause]:
    """The failed results' causes, most scenarios first (ties: first seen first)."""
    failed = [result for result in results if result.outcome is Outcome.FAILED]
    plainest, refusal = _plainest_failure(failed)
    first_answer = {
        key: next((f.observed for r in failed for f in r.failures if f.cause == key), None)
        for key in _RUN_WIDE
    }
    rotation_broken = any(r.scenario.id == EACH_SECRET for r in failed)
    keyed = [
        (result, *cause_of(result, plainest=plainest, rotation_broken=rotation_broken))
        for result in failed
    ]
    present = {key for _, key, _ in keyed}
    groups: dict[str, tuple[str, list[str]]] = {}
    for result, key, fix in keyed:
        broader = next((b for b in FOLDS_INTO.get(key, ()) if b in present), None)
        if broader is not None:  # the narrower cause is explained by the broader one
            key, fix = broader, CAUSES[broader]
        elif key in _OTHERWISE:
            key = _OTHERWISE[key]
            fix = CAUSES[key]
        if key == REFUSED_AUTHENTIC:
            fix = f"{fix}; the plainest one was answered {refusal}"
        elif key in first_answer:
            fix = f"{fix}; it answered {first_answer[key]}"
        groups.setdefault(key, (fix, []))[1].append(result.scenario.id)
    must = {r.scenario.id for r in failed if r.severity is Severity.MUST}
    causes = [Cause(key, fix, tuple(ids)) for key, (fix, ids) in groups.items()]
    # what folds the rest of the run leads, however few scenarios it counts; then a broken
    # guarantee before a convention, then the most scenarios
    return sorted(
        causes,
        key=lambda c: (c.key not in _LEADING, must.isdisjoint(c.scenarios), -len(c.scenarios)),
    )


FOLDS_INTO: Mapping[str, tuple[str, ...]] = {
    "retention": (DEDUPE,),
    UNAVAILABLE: (ACKED_IN_FLIGHT,),
    REFUSED_THEN_MISSING: (ACKED_IN_FLIGHT, UNAPPLIED),
}
"""A narrower cause and the broader ones it folds into (the first the same run shows): a
receiver that forgets a duplicate only after time or other events has a retention bug; one that
also fails the immediate duplicate does not deduplicate at all. A receiver seen acknowledging
events still in flight answers the copies that follow 503 itself (in flight, for ever or until
its background work ends): no gateway needs to be throttling. A genuine copy acknowledged after
a refused one and then missing its effect is what a receiver that acknowledges every event
before committing it (or that drops the generic event) shows too; otherwise the refused copy's
record made it "a duplicate" (:data:`_OTHERWISE`)."""

_OTHERWISE: Mapping[str, str] = {REFUSED_THEN_MISSING: VERIFY_FIRST}
"""The cause a marker points at when nothing in :data:`FOLDS_INTO` explains it."""

_LEADING = frozenset({*_RUN_WIDE, *_PLAINEST_CAUSES, EFFECT_AFTER_ANSWER, ACKED_IN_FLIGHT})
"""Causes that explain failures across families: listed first."""


def _plainest_failure(failed: Iterable[ScenarioResult]) -> tuple[str | None, str | None]:
    """The cause the plainest authentic delivery failed with, if one of
    :data:`_PLAINEST_CAUSES`, and what the receiver answered it when it refused it."""
    for result in failed:
        if result.scenario.id == PLAINEST:
            for failure in result.failures:
                if failure.cause == REFUSED_AUTHENTIC:
                    return REFUSED_AUTHENTIC, failure.observed
                if failure.cause == UNAPPLIED:
                    return UNAPPLIED, None
    return None, None
