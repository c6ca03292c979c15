"""The signature family: a receiver accepts exactly the deliveries signed with an active secret
over the raw bytes it received, and refuses every other one with a 4xx — never a 5xx."""

from __future__ import annotations

from conformance.model import (
    CASE_SENSITIVE_SIGNATURES,
    SCHEMES,
    SEVERAL_SIGNATURES,
    SIGNED_IDS,
    TIMED,
    UNSIGNED_HEADERS,
    Harness,
    Scenario,
    Severity,
    expect,
    step,
)

__all__ = ["SCENARIOS"]

RC = frozenset({Harness.R, Harness.C})

ACKED = expect("status", "every answer is 2xx", label="delivery", allowed=("2xx",))
APPLIED_ONCE = expect("effects", "the probe shows exactly 1 effect", event="a", equals=1)
NOT_APPLIED = expect("effects", "the probe shows no effect (unknown event)", event="a", equals=0)


def _fuzzed(
    slug: str,
    title: str,
    guarantee: str,
    kind: str,
    *,
    severity: Severity = Severity.MUST,
    schemes: frozenset[str] = SCHEMES,
) -> Scenario:
    return Scenario(
        id=f"signature.{slug}",
        title=title,
        guarantee=guarantee,
        severity=severity,
        tags=RC,
        steps=(step("deliver_fuzzed", event="a", label="fuzzed", kind=kind, cases=6),),
        expectations=(
            expect("status", "every answer is 4xx", label="fuzzed", allowed=("4xx",)),
            NOT_APPLIED,
        ),
        schemes=schemes,
    )


def _bad_body(kind: str, words: str, accepted_by: str, *, refusing_is_convention: bool) -> Scenario:
    """Bad bodies of ``kind``, unsigned (refused, never applied) and correctly signed (never a
    5xx, applied at most once; with ``refusing_is_convention``, a 4xx is the convention)."""
    if refusing_is_convention:
        signed_answer = expect(
            "status",
            "every answer to a correctly signed one is 4xx",
            label="signed",
            allowed=("4xx",),
            refusal="signed_bad_body",
        )
        answered = f"refusing it with a 4xx is the convention (should; {accepted_by})"
    else:
        signed_answer = expect(
            "status",
            "every answer to a correctly signed one is 2xx or 4xx",
            label="signed",
            allowed=("2xx", "4xx"),
        )
        answered = f"accepting it and refusing it are both right ({accepted_by})"
    return Scenario(
        id=f"signature.body-{kind}",
        title=f"Body that is {words} (signed and unsigned)",
        guarantee=f"A body that is {words} under the genuine body's signature is refused with a "
        "4xx, never a 5xx, and never applied. Correctly signed, it came from the secret's "
        f"holder: it is never answered 5xx and applied at most once, and {answered}.",
        severity=Severity.MUST,
        tags=RC,
        steps=(
            step("deliver_fuzzed", event="a", label="unsigned", kind=kind),
            step("deliver_fuzzed", event="b", label="signed", kind=kind, signed=True),
        ),
        expectations=(
            expect(
                "status",
                "every answer to a body the signature does not cover is 4xx",
                label="unsigned",
                allowed=("4xx",),
            ),
            NOT_APPLIED,
            signed_answer,
            expect(
                "effects",
                "the probe shows at most 1 effect for the signed event",
                event="b",
                at_most=1,
            ),
        ),
    )


def _accepted_once(
    slug: str,
    title: str,
    guarantee: str,
    *,
    severity: Severity = Severity.MUST,
    schemes: frozenset[str] = SCHEMES,
    **delivery: str,
) -> Scenario:
    """One genuine delivery, varied by ``delivery`` (a ``body`` variant or a ``mutation``):
    acknowledged (2xx) and applied once."""
    return Scenario(
        id=f"signature.{slug}",
        title=title,
        guarantee=guarantee,
        severity=severity,
        tags=RC,
        steps=(step("deliver", event="a", label="delivery", **delivery),),
        expectations=(ACKED, APPLIED_ONCE),
        schemes=schemes,
    )


def _then_genuine(slug: str, title: str, words: str, mutation: str) -> Scenario:
    return Scenario(
        id=f"signature.{slug}-then-genuine",
        title=title,
        guarantee=f"A {words} copy carrying a real event id leaves no trace: it is refused with "
        "a 4xx, and the genuine copy that follows is accepted and applied once.",
        severity=Severity.MUST,
        tags=RC,
        steps=(
            step("deliver", event="a", label="bad", mutation=mutation),
            step("deliver", event="a", label="genuine"),
        ),
        expectations=(
            expect("status", f"the {words} copy is 4xx", label="bad", allowed=("4xx",)),
            expect("status", "the genuine copy is 2xx", label="genuine", allowed=("2xx",)),
            APPLIED_ONCE,
        ),
    )


def _missing(role: str, words: str, schemes: frozenset[str]) -> Scenario:
    return Scenario(
        id=f"signature.missing-{role}",
        title=f"Missing {words}",
        guarantee=f"A delivery without its {words} is refused with 400 and never applied.",
        severity=Severity.MUST,
        tags=RC,
        steps=(step("deliver", event="a", label="delivery", mutation=f"missing:{role}"),),
        expectations=(
            expect("status", "400", label="delivery", allowed=("400",)),
            NOT_APPLIED,
        ),
        schemes=schemes,
    )


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        id="signature.valid",
        title="Valid delivery",
        guarantee="A correctly signed delivery of the generic event is acknowledged with 2xx and "
        "applied once.",
        severity=Severity.MUST,
        tags=RC,
        steps=(step("deliver", event="a", label="delivery"),),
        expectations=(ACKED, APPLIED_ONCE),
    ),
    Scenario(
        id="signature.tampered-body",
        title="Tampered body",
        guarantee="A body changed after signing is refused with 401 and never applied.",
        severity=Severity.MUST,
        tags=RC,
        steps=(step("deliver", event="a", label="delivery", mutation="tampered-body"),),
        expectations=(
            expect("status", "401", label="delivery", allowed=("401",)),
            NOT_APPLIED,
        ),
    ),
    Scenario(
        id="signature.wrong-secret",
        title="Wrong secret",
        guarantee="A delivery signed with a secret the receiver does not hold is refused with 401.",
        severity=Severity.MUST,
        tags=RC,
        steps=(step("deliver", event="a", label="delivery", mutation="wrong-secret"),),
        expectations=(
            expect("status", "401", label="delivery", allowed=("401",)),
            NOT_APPLIED,
        ),
    ),
    _missing("id", "event id", SIGNED_IDS),
    Scenario(
        id="signature.id-less-event",
        title="Authentic delivery without an event id",
        guarantee="A delivery signed correctly but carrying no event id (no id in a Stripe-style "
        "body, no X-GitHub-Delivery) is refused with 400: it could never be deduplicated. A "
        "sender never sends one, so accepting it breaks nothing yet (should).",
        severity=Severity.SHOULD,
        tags=RC,
        steps=(step("deliver", event="a", label="delivery", mutation="missing:id"),),
        expectations=(
            expect("status", "400", label="delivery", allowed=("400",)),
            NOT_APPLIED,
        ),
        schemes=SCHEMES - SIGNED_IDS,
    ),
    _missing("timestamp", "signed timestamp", TIMED),
    _missing("signature", "signature header", SCHEMES),
    _fuzzed(
        "malformed-headers",
        "Malformed headers (every header's grammar)",
        "Every webhook header the signature covers, broken one way at a time — empty, garbage, "
        "wrong shape, wrong encoding, far too long — is refused with a 4xx, never a 5xx, and "
        "never applied.",
        "headers",
    ),
    Scenario(
        id="signature.malformed-unsigned-id",
        title="Malformed event id outside the signature (X-GitHub-Delivery)",
        guarantee="An authentic delivery whose unsigned event-id header is broken — empty, "
        "garbage, not ASCII, far too long — is never answered with a 5xx. Refusing it with a "
        "4xx is the convention (should): the id could not deduplicate it, but the signature "
        "still holds, so accepting it breaks nothing yet.",
        severity=Severity.MUST,
        tags=RC,
        steps=(step("deliver_fuzzed", event="a", label="fuzzed", kind="unsigned-id", cases=3),),
        expectations=(
            expect(
                "status",
                "every answer is 4xx",
                label="fuzzed",
                allowed=("4xx",),
                refusal="unsigned_id",
            ),
        ),
        schemes=UNSIGNED_HEADERS,
    ),
    _fuzzed(
        "wrong-length-entry",
        "Well-formed signature of the wrong length",
        "A well-formed signature entry whose value decodes to 16 or 48 bytes instead of 32 is "
        "refused with a 4xx, never a 5xx (a length-checking comparison throws).",
        "wrong-length",
    ),
    _fuzzed(
        "truncated-signature",
        "A prefix of the genuine signature",
        "The genuine delivery carrying only the first 3 or 30 bytes of its own signature is "
        "refused with a 4xx and never applied: a comparison that accepts a prefix lets anyone "
        "forge a delivery by guessing one byte at a time.",
        "truncated",
    ),
    _fuzzed(
        "case-swapped",
        "The genuine signature with its letters' case swapped",
        "The genuine delivery whose base64 signature has every letter in the other case (other "
        "bytes) is refused with a 4xx and never applied. A hardening (should): a comparison "
        "that ignores case (strcasecmp, EqualFold, both sides lower-cased) accepts it, yet "
        "building it takes the genuine signature, so it forges nothing a replay would not.",
        "case-swapped",
        severity=Severity.SHOULD,
        schemes=CASE_SENSITIVE_SIGNATURES,
    ),
    _bad_body(
        "not-utf8",
        "not UTF-8",
        "Go's encoding/json and Ruby's JSON take invalid UTF-8",
        refusing_is_convention=True,
    ),
    _bad_body(
        "not-json",
        "not JSON",
        "a receiver that queues the raw bytes never parses them",
        refusing_is_convention=True,
    ),
    _bad_body(
        "not-ijson",
        "not I-JSON (a lone surrogate escape)",
        "RFC 8259's grammar allows one and Python's json and JavaScript's JSON.parse take it; "
        "a receiver that then stores the string as UTF-8 text fails with it on every retry",
        refusing_is_convention=False,
    ),
    _fuzzed(
        "body-odd-json",
        "Unsigned JSON of any shape or depth",
        "A body that parses as JSON but is no event — null, a list, a string, a number, {}, "
        "fields of the wrong types, lists nested 2,000 deep — under a signature that does not "
        "match it is refused with a 4xx, never a 5xx, and never applied: a receiver that reads "
        "the body before verifying it (to route on its type, log its id or pick a tenant's "
        "secret) must not trip on what an unauthenticated client sends.",
        "odd-json",
    ),
    _accepted_once(
        "rotation",
        "Secret rotation: two signatures, one valid",
        "A delivery carrying several signatures is accepted when any one matches an "
        "active secret, wherever it appears in the header.",
        schemes=SEVERAL_SIGNATURES,
        mutation="rotation",
    ),
    _accepted_once(
        "unknown-version",
        "Unknown signature version ignored",
        "A signature entry of an unknown version is skipped, never an error by itself.",
        schemes=SEVERAL_SIGNATURES,
        mutation="unknown-version",
    ),
    _accepted_once(
        "raw-bytes",
        "Raw bytes verified (unusual but valid JSON)",
        "The signature is checked over the exact bytes received, so odd whitespace and "
        "escapes in valid JSON verify.",
        body="unusual",
    ),
    _accepted_once(
        "utf8-body",
        "Non-ASCII text in the body (raw UTF-8)",
        "A genuine delivery whose JSON carries accents, CJK and emoji as raw UTF-8 "
        "verifies and is applied once: the signature covers the bytes received, not a string "
        "decoded and re-encoded with another charset.",
        body="utf8",
    ),
    _accepted_once(
        "nul-escape",
        "A \\u0000 escape in the body's JSON",
        "A genuine delivery whose JSON holds a string with a \\u0000 escape (valid "
        "JSON and I-JSON: U+0000 is a character like any other) is accepted and applied once. "
        "PostgreSQL's text and jsonb cannot hold U+0000, so a receiver that stores the payload "
        "there as it is answers 5xx to every retry of a genuine event until the sender gives "
        "up. A should: senders rarely send one, and a receiver may choose to refuse it.",
        severity=Severity.SHOULD,
        body="nul",
    ),
    _accepted_once(
        "content-type-charset",
        "Content-Type with a charset parameter",
        "A genuine delivery whose Content-Type carries a charset parameter "
        "(application/json; charset=utf-8, as Stripe and many HTTP clients send it, or "
        "application/json;charset=UTF-8, as Java's do) is accepted and applied once: a media "
        "type is compared without its parameters, and a receiver that compares the whole "
        "header with application/json refuses it (415). A should where the platform's own "
        "sender never adds one; under the stripe scheme every delivery carries it.",
        severity=Severity.SHOULD,
        mutation="charset",
    ),
    Scenario(
        id="signature.header-name-case",
        title="Header names in another case (Webhook-Id, as Go writes them)",
        guarantee="HTTP field names are case-insensitive: two genuine deliveries of different "
        "events whose header names are written Webhook-Id, Webhook-Signature, Content-Type (Go's "
        "net/http canonical form, what many senders send) are each accepted and applied once — "
        "an id looked up by its exact lower-case spelling is missing, and the second event is "
        "taken for a duplicate of the first.",
        severity=Severity.MUST,
        tags=RC,
        steps=(
            step("deliver", event="a", label="delivery", mutation="canonical-names"),
            step("deliver", event="b", label="delivery", mutation="canonical-names"),
        ),
        expectations=(
            ACKED,
            APPLIED_ONCE,
            expect("effects", "the probe shows 1 effect for the second event", event="b", equals=1),
        ),
    ),
    Scenario(
        id="signature.repeated-headers",
        title="A webhook header repeated with another value",
        guarantee="After a genuine delivery, copies of it with one webhook header sent twice "
        "(the genuine value and another: another id, timestamp or signature; first or last) "
        "are never answered 5xx and never applied again under the genuine id; applying one "
        "under the other id (verified with one value, deduplicated on the other) is a should: "
        "it takes a captured request replayed within the tolerance, and the standardwebhooks "
        "and svix Python libraries given Starlette's request.headers verify the last value "
        "where request.headers[...] reads the first.",
        severity=Severity.MUST,
        tags=RC,
        steps=(
            step("deliver", event="a", label="genuine"),
            step("deliver_fuzzed", event="a", label="repeated", kind="repeated", other="b"),
        ),
        expectations=(
            expect("status", "the genuine copy is 2xx", label="genuine", allowed=("2xx",)),
            expect(
                "status",
                "every copy with a repeated header is 2xx (a duplicate) or 4xx",
                label="repeated",
                allowed=("2xx", "4xx"),
            ),
            APPLIED_ONCE,
            expect(
                "effects",
                "the probe shows no effect under the other id",
                event="b",
                equals=0,
                severity=Severity.SHOULD.value,
            ),
        ),
    ),
    Scenario(
        id="signature.list-positions",
        title="Valid signature first, middle and last in the list",
        guarantee="A delivery is accepted when its valid signature is first, in the middle or "
        "last among entries the receiver must skip (another key's, an unknown version's).",
        severity=Severity.MUST,
        tags=RC,
        steps=tuple(
            step("deliver", event=f"list-{where}", label="delivery", mutation=f"listed:{where}")
            for where in ("first", "middle", "last")
        ),
        expectations=(
            ACKED,
            expect("effects_every", "the probe shows 1 effect for each", prefix="list-", equals=1),
        ),
        schemes=SEVERAL_SIGNATURES,
    ),
    Scenario(
        id="signature.each-secret",
        title="Each of the runner's secrets in turn",
        guarantee="A delivery signed with any one of the active secrets (every --secret given, "
        "each alone) is accepted: a receiver that only tries its first secret breaks rotation.",
        severity=Severity.MUST,
        tags=RC,
        steps=(step("deliver_each_secret", event="secret", label="delivery"),),
        expectations=(
            ACKED,
            expect(
                "effects_every", "the probe shows 1 effect for each", prefix="secret-", equals=1
            ),
        ),
    ),
    _then_genuine("forged", "Forged copy first, genuine after", "forged", "wrong-secret"),
    _then_genuine("tampered", "Tampered copy first, genuine after", "tampered", "tampered-body"),
    _then_genuine("garbled", "Unparseable signature first, genuine after", "garbled", "garbled"),
)
