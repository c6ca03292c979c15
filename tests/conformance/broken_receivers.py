"""Receivers written WITHOUT hookproof's middleware: one correct, many deliberately broken.

:func:`plain_receiver` builds a small Starlette app that verifies Standard Webhooks by hand
(``hmac`` + ``base64``), keeps a durable inbox in ``sqlite3`` and implements the probe contract.
With no bug it is a correct, independent receiver; each named bug in :data:`BROKEN` switches on one
way a real receiver gets a guarantee wrong, and :data:`MUST_FAIL` says which scenarios must catch
it. Overlap between concurrent copies is controlled by the receiver (it yields to the event loop
between claiming and committing), never by a sleep.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import itertools
import json
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

PROBE_TOKEN = "probe-token-for-tests"

BROKEN: Mapping[str, str] = {
    "rejects-generic-event": "answers 422 to an event type it does not know",
    "ignores-generic-event": "answers 200 to an event type it has no handler for and records "
    "nothing (Stripe's sample: 'Unhandled event type', then success)",
    "no-signature-check": "never verifies the signature",
    "missing-is-401": "answers 401 (not 400) when a header is missing",
    "crash-on-malformed": "parses headers without guarding, so garbage raises a 500",
    "only-first-signature": "checks only the first signature of the header",
    "rejects-unknown-version": "refuses a header holding a signature version it does not know",
    "reserialized-json": "verifies json.dumps(json.loads(body)) instead of the raw bytes",
    "tight-tolerance": "accepts only 60 s of skew instead of the 300 s promised",
    "no-timestamp-check": "never checks the signed timestamp",
    "accepts-far-future": "checks only that the timestamp is not too old",
    "dedupe-before-verify": "answers a known event id before verifying the request",
    "seen-before-verify": "adds every webhook-id to its seen set before verifying, and answers "
    "an id in the set as a duplicate",
    "no-dedupe": "applies every valid delivery",
    "dedupe-on-body-hash": "deduplicates by the body's hash instead of the event id",
    "conflict-on-duplicate": "answers 409 to a duplicate of a committed event",
    "check-then-insert-race": "checks, yields, then inserts: concurrent copies all apply",
    "in-flight-409": "answers 409 to a copy that arrives while the first is in flight",
    "in-flight-500": "answers 500 to a copy that arrives while the first is in flight",
    "in-flight-no-retry-after": "answers 503 without Retry-After while the first copy is in flight",
    "ack-before-commit": "answers 2xx and commits later (on the next delivery)",
    "slow": "takes longer than the sender's timeout to answer",
    "plain-text-errors": "refuses with text/plain instead of problem details",
    "leaky-errors": "echoes the signature it expected in its 401 body",
    "only-first-secret": "tries only the first of its secrets (rotation breaks)",
    "only-last-signature": "checks only the last entry of the signature header",
    "crash-on-wrong-length": "compares with a length-checking compare that throws on 16/48 bytes",
    "prefix-compare": "avoids the length error by comparing the expected digest cut to the given "
    "signature's length (a prefix passes)",
    "case-insensitive-compare": "compares the base64 signatures lower-cased, as one may hex",
    "crash-on-non-utf8": "decodes the body as UTF-8 before anything, unguarded",
    "crash-on-non-json": "parses the verified body as JSON without a guard",
    "exact-content-type": "answers 415 unless Content-Type is exactly application/json",
    "payload-text-unescaped": "keeps each verified payload as readable text "
    "(json.dumps(ensure_ascii=False)) in SQLite: a lone surrogate cannot be encoded, a 500",
    "crash-on-timestamp": "int()s the timestamp header without a guard",
    "crash-on-signature-entry": "unpacks 'version, sig = entry.split(\",\")' and decodes unguarded",
    "case-sensitive-header": "looks up 'Webhook-Id' in the raw headers case-sensitively",
    "key-not-decoded": "uses the 'whsec_…' string itself as the HMAC key",
    "strips-whitespace": "verifies body.strip() instead of the raw bytes",
    "decodes-as-ascii": "verifies the body decoded and re-encoded in ASCII (a platform charset)",
    "dedupes-on-last-id": "verifies with the first webhook-id header, deduplicates on the last",
    "record-id-before-verify": "records the event id as processed before verifying",
    "claim-not-released": "claims the event id before verifying and keeps the claim on refusal",
    "seen-before-timestamp-check": "records the id after the signature, before the timestamp check",
    "ack-in-flight-copy": "answers 200 'already received' to a copy while the first is in flight",
    "dedupe-expires": "keeps its dedupe record for a fraction of a second only",
    "remembers-last-id": 'dedupes only against the event it handled last ("is it a retry?")',
    "no-body-limit": "accepts a body of any size",
    "body-limit-500": "raises (500) when the body is over its limit",
    "limit-below-declared": "keeps a framework default of 1 KiB, below the limit it declares",
    "case-insensitive-ids": "keys its inbox on the event id COLLATE NOCASE (as MySQL's default "
    "collation does)",
    "routes-before-verify": "reads the event's type from the body to pick its handler before "
    "verifying, guarding only json.JSONDecodeError: null, a list or lists nested past the "
    "recursion limit raise a 500",
}
"""Every broken receiver: its bug in words."""

MUST_FAIL: Mapping[str, frozenset[str]] = {
    "rejects-generic-event": frozenset({"signature.valid", "idempotency.sequential-duplicate"}),
    "ignores-generic-event": frozenset({"signature.valid", "idempotency.sequential-duplicate"}),
    "no-signature-check": frozenset({"signature.tampered-body", "signature.wrong-secret"}),
    "missing-is-401": frozenset(
        {"signature.missing-id", "signature.missing-timestamp", "signature.missing-signature"}
    ),
    "crash-on-malformed": frozenset({"signature.malformed-headers"}),
    "only-first-signature": frozenset({"signature.rotation"}),
    "rejects-unknown-version": frozenset({"signature.unknown-version"}),
    "reserialized-json": frozenset({"signature.raw-bytes"}),
    "tight-tolerance": frozenset({"clock.past-inside", "clock.future-inside"}),
    "no-timestamp-check": frozenset(
        {
            "clock.past-outside",
            "clock.future-outside",
            "clock.far-future",
            "clock.replay-after-window",
        }
    ),
    "accepts-far-future": frozenset({"clock.future-outside", "clock.far-future"}),
    "dedupe-before-verify": frozenset({"clock.replay-after-window"}),
    "seen-before-verify": frozenset(
        {"signature.forged-then-genuine", "signature.truncated-signature"}
    ),
    "no-dedupe": frozenset(
        {
            "idempotency.sequential-duplicate",
            "idempotency.crash-after-send",
            "idempotency.concurrent-duplicates",
            "idempotency.redrive-duplicate",
            "idempotency.double-redrive",
            "idempotency.in-flight-duplicate",
            "idempotency.sender-hung-up",
            "story.renewal-reminder",
        }
    ),
    "dedupe-on-body-hash": frozenset({"idempotency.distinct-same-body"}),
    "conflict-on-duplicate": frozenset(
        {
            "idempotency.sequential-duplicate",
            "idempotency.crash-after-send",
            "idempotency.redrive-duplicate",
            "story.renewal-reminder",
        }
    ),
    "check-then-insert-race": frozenset({"idempotency.concurrent-duplicates"}),
    "in-flight-409": frozenset({"idempotency.in-flight-duplicate"}),
    "in-flight-500": frozenset({"idempotency.in-flight-duplicate"}),
    "in-flight-no-retry-after": frozenset({"idempotency.in-flight-duplicate"}),
    "ack-before-commit": frozenset({"response.ack-after-commit"}),
    "slow": frozenset({"response.within-timeout"}),
    "plain-text-errors": frozenset({"response.problem-details"}),
    "leaky-errors": frozenset({"response.no-secret-leak"}),
    "only-first-secret": frozenset({"signature.each-secret"}),
    "only-last-signature": frozenset({"signature.list-positions"}),
    "crash-on-wrong-length": frozenset({"signature.wrong-length-entry"}),
    "prefix-compare": frozenset({"signature.truncated-signature"}),
    "case-insensitive-compare": frozenset({"signature.case-swapped"}),
    "crash-on-non-utf8": frozenset({"signature.body-not-utf8"}),
    "crash-on-non-json": frozenset({"signature.body-not-json"}),
    "payload-text-unescaped": frozenset({"signature.body-not-ijson"}),
    "exact-content-type": frozenset({"signature.content-type-charset"}),
    "crash-on-timestamp": frozenset({"signature.malformed-headers"}),
    "crash-on-signature-entry": frozenset({"signature.malformed-headers"}),
    "case-sensitive-header": frozenset({"signature.valid"}),
    "key-not-decoded": frozenset({"signature.valid", "signature.each-secret"}),
    "strips-whitespace": frozenset({"signature.raw-bytes"}),
    "decodes-as-ascii": frozenset({"signature.utf8-body"}),
    "dedupes-on-last-id": frozenset({"signature.repeated-headers"}),
    "record-id-before-verify": frozenset(
        {"signature.forged-then-genuine", "signature.tampered-then-genuine"}
    ),
    "claim-not-released": frozenset(
        {"signature.forged-then-genuine", "signature.garbled-then-genuine"}
    ),
    "seen-before-timestamp-check": frozenset({"clock.stale-then-genuine"}),
    "ack-in-flight-copy": frozenset({"idempotency.staggered-duplicates"}),
    "dedupe-expires": frozenset({"idempotency.late-duplicate"}),
    "remembers-last-id": frozenset({"idempotency.duplicate-after-other-events"}),
    "no-body-limit": frozenset({"size.over-limit"}),
    "body-limit-500": frozenset({"size.over-limit"}),
    "limit-below-declared": frozenset({"size.within-limit"}),
    "case-insensitive-ids": frozenset({"idempotency.case-distinct-ids"}),
    "routes-before-verify": frozenset({"signature.body-odd-json"}),
}
"""For each broken receiver, the scenarios that must fail against it (with a probe)."""

SECOND_SECRET = "whsec_" + base64.b64encode(b"the-second-secret-of-rotation").decode()
TWO_SECRETS = frozenset({"only-first-secret"})
"""Bugs shown with two secrets on both sides (the runner signs with each in turn)."""
SETTINGS: Mapping[str, Mapping[str, object]] = {"dedupe-expires": {"patience": 0.3}}
"""Runner settings a bug needs to show: wait longer than its dedupe record lasts."""

DEDUPE_EXPIRY_S = 0.1
MAX_BODY = 4096

KNOWN_TYPES = frozenset({"invoice.paid", "renewal.reminder"})


@dataclass
class _State:
    db: sqlite3.Connection
    keys: list[bytes]
    bugs: frozenset[str]
    tolerance: int
    pending: list[str] = field(default_factory=list)
    never: asyncio.Event | None = None
    seen: set[str] = field(default_factory=set)
    """Event ids a "seen set" receiver answers as duplicates without looking further."""
    serial: itertools.count[int] = field(default_factory=itertools.count)
    last_key: str | None = None
    """The key handled last (``remembers-last-id`` forgets every earlier one)."""


def _problem(state: _State, status: int, slug: str, detail: str) -> Response:
    if "plain-text-errors" in state.bugs:
        return PlainTextResponse(detail, status_code=status)
    return JSONResponse(
        {"type": f"https://example.test/problems/{slug}", "title": detail, "status": status},
        status_code=status,
        media_type="application/problem+json",
    )


def _schema(db: sqlite3.Connection, *, key_collation: str = "BINARY") -> None:
    db.executescript(
        f"""
        CREATE TABLE IF NOT EXISTS inbox (
            key TEXT PRIMARY KEY COLLATE {key_collation}, event_id TEXT, state TEXT,
            status INTEGER, deliveries INTEGER, created REAL);
        CREATE TABLE IF NOT EXISTS effects (event_id TEXT);
        CREATE TABLE IF NOT EXISTS payloads (event_id TEXT, payload TEXT);
        """
    )


def _entries(state: _State, header: str) -> list[bytes] | Response:
    """The decoded v1 signatures of the header (or the refusal)."""
    bugs = state.bugs
    if "crash-on-signature-entry" in bugs:
        pairs = []
        for entry in header.split(" "):
            version, sig = entry.split(",")  # ValueError without (or with two) commas: a 500
            pairs.append((version, sig))
        return [base64.b64decode(sig) for version, sig in pairs if version == "v1"]
    entries = [entry.split(",", 1) for entry in header.split() if "," in entry]
    if not entries:
        return _problem(state, 400, "malformed-header", "no signature entry")
    if "rejects-unknown-version" in bugs and any(v != "v1" for v, _ in entries):
        return _problem(state, 400, "malformed-header", "unknown signature version")
    if "only-first-signature" in bugs:
        entries = entries[:1]
    if "only-last-signature" in bugs:
        entries = entries[-1:]
    candidates = []
    for version, sig in entries:
        if version == "v1":
            try:
                candidates.append(base64.b64decode(sig, validate=True))
            except ValueError:
                continue
    return candidates


def _length_checked_equal(a: bytes, b: bytes) -> bool:
    """Like Node's ``crypto.timingSafeEqual``: throws when the lengths differ."""
    if len(a) != len(b):
        raise ValueError("Input buffers must have the same byte length")
    return hmac.compare_digest(a, b)


def _prefix_equal(expected: bytes, given: bytes) -> bool:
    """The "safe" compare some receivers write to dodge the length error: ``expected`` cut to
    the length of what was given, so any prefix of the real signature matches."""
    return bool(given) and hmac.compare_digest(expected[: len(given)], given)


def _verify(state: _State, headers: Mapping[str, str], body: bytes) -> Response | None:
    """``None`` when the delivery is authentic, else the refusal."""
    bugs = state.bugs
    missing = 401 if "missing-is-401" in bugs else 400
    if "case-sensitive-header" in bugs:  # a plain dict of the names as they arrived (lower case)
        raw = dict(headers.items())
        names = ("Webhook-Id", "Webhook-Timestamp", "Webhook-Signature")
        headers = {name.lower(): raw[name] for name in names if name in raw}
    event_id = headers.get("webhook-id")
    raw_ts = headers.get("webhook-timestamp")
    header = headers.get("webhook-signature")
    if event_id is None or raw_ts is None or header is None:
        return _problem(state, missing, "missing-header", "a webhook header is missing")
    if "crash-on-non-utf8" in bugs:
        body.decode("utf-8")  # UnicodeDecodeError: a 500
    if "record-id-before-verify" in bugs:
        state.seen.add(event_id)
    if "crash-on-malformed" in bugs:
        timestamp = int(raw_ts)  # raises on garbage: a 500
        entries = [entry.split(",", 1) for entry in header.split(" ")]
        candidates: list[bytes] = [base64.b64decode(sig, validate=True) for _, sig in entries]
    else:
        if "crash-on-timestamp" in bugs:
            timestamp = int(raw_ts)  # ValueError on garbage: a 500
        elif not (raw_ts.isascii() and raw_ts.isdigit() and len(raw_ts) <= 12):
            return _problem(state, 400, "malformed-header", "the timestamp is malformed")
        if not event_id or not event_id.isascii() or " " in event_id or len(event_id) > 255:
            return _problem(state, 400, "malformed-header", "the event id is malformed")
        timestamp = int(raw_ts)
        found = _entries(state, header)
        if isinstance(found, Response):
            return found
        candidates = found

    def timestamp_refusal() -> Response | None:
        if "no-timestamp-check" in bugs:
            return None
        tolerance = 60 if "tight-tolerance" in bugs else state.tolerance
        now = int(time.time())
        too_old = timestamp < now - tolerance
        too_new = timestamp > now + tolerance and "accepts-far-future" not in bugs
        if too_old or too_new:
            return _problem(state, 401, "timestamp-outside-tolerance", "timestamp out of range")
        return None

    late_check = "seen-before-timestamp-check" in bugs
    if not late_check:
        refusal = timestamp_refusal()
        if refusal is not None:
            return refusal
    if "no-signature-check" in bugs:
        return None
    signed_body = body
    if "reserialized-json" in bugs:
        try:
            signed_body = json.dumps(
                json.loads(body), separators=(",", ":"), ensure_ascii=False
            ).encode()
        except ValueError:
            return _problem(state, 400, "invalid-payload", "not JSON")
    if "strips-whitespace" in bugs:
        signed_body = body.strip()
    if "decodes-as-ascii" in bugs:
        signed_body = body.decode("ascii", "replace").encode("ascii", "replace")
    signed = f"{event_id}.{raw_ts}.".encode() + signed_body
    keys = state.keys[:1] if "only-first-secret" in bugs else state.keys
    equal: Callable[[bytes, bytes], bool] = hmac.compare_digest
    if "crash-on-wrong-length" in bugs:
        equal = _length_checked_equal
    elif "prefix-compare" in bugs:
        equal = _prefix_equal
    expected = b""
    matched = False
    for key in keys:
        expected = hmac.digest(key, signed, "sha256")
        matched = matched or any(equal(expected, c) for c in candidates)
        if "case-insensitive-compare" in bugs:  # a habit from hex, where case means nothing
            text = base64.b64encode(expected).lower()
            given = (entry.partition(",")[2].lower().encode() for entry in header.split(" "))
            matched = matched or any(hmac.compare_digest(text, sig) for sig in given)
    if not matched:
        detail = "no signature matches"
        if "leaky-errors" in bugs:
            detail += f"; expected v1,{base64.b64encode(expected).decode()}"
        return _problem(state, 401, "signature-mismatch", detail)
    if late_check:
        state.seen.add(event_id)
        return timestamp_refusal()
    return None


Verify = Callable[[Mapping[str, str], bytes], tuple[str, Response | None]]
"""A receiver's own verification: the event id and ``None``, or the refusal."""


def plain_receiver(
    secret: str | Sequence[str],
    *,
    bugs: frozenset[str] = frozenset(),
    db_path: str = ":memory:",
    tolerance: int = 300,
    max_body: int = MAX_BODY,
    verify: Verify | None = None,
) -> Starlette:
    """A webhook receiver on ``POST /webhooks`` with the probe on
    ``GET /_hookproof/events/{event_id}``; ``bugs`` are names from :data:`BROKEN`.

    By default it verifies Standard Webhooks by hand with ``secret`` (one or several, tried in
    order); ``verify`` replaces that with a receiver's own verification (a public library's)."""
    unknown = bugs - set(BROKEN)
    assert not unknown, unknown
    db = sqlite3.connect(db_path, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL") if db_path != ":memory:" else None
    _schema(db, key_collation="NOCASE" if "case-insensitive-ids" in bugs else "BINARY")
    secrets = [secret] if isinstance(secret, str) else list(secret)
    if "key-not-decoded" in bugs or verify is not None:
        keys = [s.encode() for s in secrets]
    else:
        keys = [base64.b64decode(s.removeprefix("whsec_")) for s in secrets]
    state = _State(db, keys, bugs, tolerance)
    work_turns = 500 if "ack-in-flight-copy" in bugs else 3

    def apply(key: str, event_id: str) -> None:
        with_tx = db.execute
        with_tx("BEGIN IMMEDIATE")
        with_tx("INSERT INTO effects VALUES (?)", (event_id,))
        with_tx("UPDATE inbox SET state='committed', status=200 WHERE key=?", (key,))
        with_tx("COMMIT")

    def authenticate(headers: Mapping[str, str], body: bytes) -> tuple[str, Response | None]:
        if verify is not None:
            return verify(headers, body)
        event_id = headers.get("webhook-id", "")
        if "seen-before-verify" in bugs:
            state.seen.add(event_id)
        if "claim-not-released" in bugs and event_id:
            db.execute(
                "INSERT OR IGNORE INTO inbox VALUES (?, ?, 'in_flight', NULL, 1, ?)",
                (event_id, event_id, time.monotonic()),
            )
        return event_id, _verify(state, headers, body)

    async def webhook(request: Request) -> Response:
        body = await request.body()
        limit = 1024 if "limit-below-declared" in bugs else max_body
        if len(body) > limit and "no-body-limit" not in bugs:
            if "body-limit-500" in bugs:
                raise RuntimeError("request entity too large")
            return _problem(state, 413, "body-too-large", "the body is too large")
        headers = request.headers
        if "exact-content-type" in bugs and headers.get("content-type") != "application/json":
            return _problem(state, 415, "unsupported-media-type", "expected application/json")
        if "slow" in bugs:
            state.never = state.never or asyncio.Event()
            await state.never.wait()
        for key in list(state.pending):  # ack-before-commit: commit what the last one promised
            state.pending.remove(key)
            apply(key, key)
        if "dedupe-before-verify" in bugs:
            event_id = headers.get("webhook-id", "")
            row = db.execute("SELECT state FROM inbox WHERE key=?", (event_id,)).fetchone()
            if row is not None and row[0] == "committed":
                return JSONResponse({"status": "already applied"})
        if "routes-before-verify" in bugs:
            try:  # the event family picks the handler: null, [] or {} raise, so does nesting
                family = json.loads(body)["type"].split(".")[0]
            except json.JSONDecodeError:
                return _problem(state, 400, "invalid-payload", "the body is not JSON")
            if not family:
                return _problem(state, 400, "invalid-payload", "the event has no type")
        if headers.get("webhook-id") in state.seen:  # the "seen set" receivers' dedupe
            return JSONResponse({"status": "duplicate"})
        event_id, refusal = authenticate(headers, body)
        if refusal is not None:
            return refusal
        if "dedupes-on-last-id" in bugs:
            event_id = headers.getlist("webhook-id")[-1]
        if "crash-on-non-json" in bugs:
            document = json.loads(body)  # ValueError on a signed non-JSON body: a 500
        else:
            try:
                document = json.loads(body)
            except ValueError:
                return _problem(state, 400, "invalid-payload", "the body is not JSON")
        if not isinstance(document, dict):
            return _problem(state, 400, "invalid-payload", "the body is not a JSON object")
        if "payload-text-unescaped" in bugs:  # UnicodeEncodeError on a lone surrogate: a 500
            text = json.dumps(document, ensure_ascii=False)
            db.execute("INSERT INTO payloads VALUES (?, ?)", (event_id, text))
        if "rejects-generic-event" in bugs and document.get("type") not in KNOWN_TYPES:
            return _problem(state, 422, "unknown-type", "unknown event type")
        if "ignores-generic-event" in bugs and document.get("type") not in KNOWN_TYPES:
            return JSONResponse({"status": "ignored"})
        key = hashlib.sha256(body).hexdigest() if "dedupe-on-body-hash" in bugs else event_id
        if "no-dedupe" in bugs:
            key = f"{event_id}#{next(state.serial)}"
        if "check-then-insert-race" in bugs:
            row = db.execute("SELECT state FROM inbox WHERE key=?", (key,)).fetchone()
            await asyncio.sleep(0)  # yield between check and insert: the race window
            if row is None:
                db.execute(
                    "INSERT OR REPLACE INTO inbox VALUES (?, ?, 'in_flight', NULL, 1, ?)",
                    (key, event_id, time.monotonic()),
                )
                await asyncio.sleep(0)
                apply(key, event_id)
            return JSONResponse({"status": "ok"})
        db.execute("BEGIN IMMEDIATE")
        if "remembers-last-id" in bugs:
            if state.last_key not in (None, key):
                db.execute("DELETE FROM inbox WHERE key = ?", (state.last_key,))
            state.last_key = key
        if "dedupe-expires" in bugs:
            db.execute(
                "DELETE FROM inbox WHERE created < ? AND state = 'committed'",
                (time.monotonic() - DEDUPE_EXPIRY_S,),
            )
        row = db.execute("SELECT state FROM inbox WHERE key=?", (key,)).fetchone()
        if row is None:
            db.execute(
                "INSERT INTO inbox VALUES (?, ?, 'in_flight', NULL, 1, ?)",
                (key, event_id, time.monotonic()),
            )
        else:
            db.execute("UPDATE inbox SET deliveries = deliveries + 1 WHERE key=?", (key,))
        db.execute("COMMIT")
        if row is not None and row[0] == "committed":
            if "conflict-on-duplicate" in bugs:
                return _problem(state, 409, "duplicate", "already processed")
            return JSONResponse({"status": "already applied"})
        if row is not None:  # in flight
            if "in-flight-409" in bugs:
                return _problem(state, 409, "duplicate", "being processed")
            if "in-flight-500" in bugs:
                return _problem(state, 500, "internal", "the event is locked")
            if "ack-in-flight-copy" in bugs:
                return JSONResponse({"status": "already received"})
            extra = {} if "in-flight-no-retry-after" in bugs else {"retry-after": "1"}
            return Response(status_code=503, headers=extra)
        if "ack-before-commit" in bugs:
            state.pending.append(key)
            return JSONResponse({"status": "accepted"})
        for _ in range(work_turns):
            await asyncio.sleep(0)  # the handler's work: concurrent copies overlap here
        apply(key, event_id)
        return JSONResponse({"status": "applied"})

    async def probe(request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {PROBE_TOKEN}":
            return Response(status_code=401)
        event_id = request.path_params["event_id"]
        rows = db.execute(
            "SELECT state, deliveries FROM inbox WHERE event_id=?", (event_id,)
        ).fetchall()
        effects = db.execute(
            "SELECT count(*) FROM effects WHERE event_id=?", (event_id,)
        ).fetchone()[0]
        if not rows and not effects:
            return Response(status_code=404)
        status = "committed" if rows and all(r[0] == "committed" for r in rows) else "in_flight"
        deliveries = sum(r[1] for r in rows)
        return JSONResponse(
            {"event_id": event_id, "status": status, "effects": effects, "deliveries": deliveries}
        )

    return Starlette(
        routes=[
            Route("/webhooks", webhook, methods=["POST"]),
            Route("/_hookproof/events/{event_id}", probe, methods=["GET"]),
        ]
    )
