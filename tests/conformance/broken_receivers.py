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
from collections.abc import Mapping
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

PROBE_TOKEN = "probe-token-for-tests"

BROKEN: Mapping[str, str] = {
    "rejects-generic-event": "answers 422 to an event type it does not know",
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
    "no-dedupe": "applies every valid delivery",
    "dedupe-on-body-hash": "deduplicates by the body's hash instead of the event id",
    "conflict-on-duplicate": "answers 409 to a duplicate of a committed event",
    "check-then-insert-race": "checks, yields, then inserts: concurrent copies all apply",
    "in-flight-409": "answers 409 to a copy that arrives while the first is in flight",
    "in-flight-no-retry-after": "answers 503 without Retry-After while the first copy is in flight",
    "ack-before-commit": "answers 2xx and commits later (on the next delivery)",
    "slow": "takes longer than the sender's timeout to answer",
    "plain-text-errors": "refuses with text/plain instead of problem details",
    "leaky-errors": "echoes the signature it expected in its 401 body",
}
"""Every broken receiver: its bug in words."""

MUST_FAIL: Mapping[str, frozenset[str]] = {
    "rejects-generic-event": frozenset({"signature.valid", "idempotency.sequential-duplicate"}),
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
    "no-dedupe": frozenset(
        {
            "idempotency.sequential-duplicate",
            "idempotency.crash-after-send",
            "idempotency.concurrent-duplicates",
            "idempotency.redrive-duplicate",
            "idempotency.double-redrive",
            "idempotency.in-flight-duplicate",
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
    "in-flight-no-retry-after": frozenset({"idempotency.in-flight-duplicate"}),
    "ack-before-commit": frozenset({"response.ack-after-commit"}),
    "slow": frozenset({"response.within-timeout"}),
    "plain-text-errors": frozenset({"response.problem-details"}),
    "leaky-errors": frozenset({"response.no-secret-leak"}),
}
"""For each broken receiver, the scenarios that must fail against it (with a probe)."""

KNOWN_TYPES = frozenset({"invoice.paid", "renewal.reminder"})


@dataclass
class _State:
    db: sqlite3.Connection
    key: bytes
    bugs: frozenset[str]
    tolerance: int
    pending: list[str] = field(default_factory=list)
    never: asyncio.Event | None = None
    serial: itertools.count[int] = field(default_factory=itertools.count)


def _problem(state: _State, status: int, slug: str, detail: str) -> Response:
    if "plain-text-errors" in state.bugs:
        return PlainTextResponse(detail, status_code=status)
    return JSONResponse(
        {"type": f"https://example.test/problems/{slug}", "title": detail, "status": status},
        status_code=status,
        media_type="application/problem+json",
    )


def _schema(db: sqlite3.Connection) -> None:
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS inbox (
            key TEXT PRIMARY KEY, event_id TEXT, state TEXT, status INTEGER, deliveries INTEGER);
        CREATE TABLE IF NOT EXISTS effects (event_id TEXT);
        """
    )


def _verify(state: _State, headers: Mapping[str, str], body: bytes) -> Response | None:
    """``None`` when the delivery is authentic, else the refusal."""
    bugs = state.bugs
    missing = 401 if "missing-is-401" in bugs else 400
    event_id = headers.get("webhook-id")
    raw_ts = headers.get("webhook-timestamp")
    header = headers.get("webhook-signature")
    if event_id is None or raw_ts is None or header is None:
        return _problem(state, missing, "missing-header", "a webhook header is missing")
    if "crash-on-malformed" in bugs:
        timestamp = int(raw_ts)  # raises on garbage: a 500
        entries = [entry.split(",", 1) for entry in header.split(" ")]
        candidates = [base64.b64decode(sig, validate=True) for _, sig in entries]
    else:
        if not (raw_ts.isascii() and raw_ts.isdigit() and len(raw_ts) <= 12):
            return _problem(state, 400, "malformed-header", "the timestamp is malformed")
        if not event_id or not event_id.isascii() or " " in event_id or len(event_id) > 255:
            return _problem(state, 400, "malformed-header", "the event id is malformed")
        timestamp = int(raw_ts)
        entries = [entry.split(",", 1) for entry in header.split() if "," in entry]
        if not entries:
            return _problem(state, 400, "malformed-header", "no signature entry")
        if "rejects-unknown-version" in bugs and any(v != "v1" for v, _ in entries):
            return _problem(state, 400, "malformed-header", "unknown signature version")
        if "only-first-signature" in bugs:
            entries = entries[:1]
        candidates = []
        for version, sig in entries:
            if version == "v1":
                try:
                    candidates.append(base64.b64decode(sig, validate=True))
                except ValueError:
                    continue
    if "no-timestamp-check" not in bugs:
        tolerance = 60 if "tight-tolerance" in bugs else state.tolerance
        now = int(time.time())
        too_old = timestamp < now - tolerance
        too_new = timestamp > now + tolerance and "accepts-far-future" not in bugs
        if too_old or too_new:
            return _problem(state, 401, "timestamp-outside-tolerance", "timestamp out of range")
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
    signed = f"{event_id}.{raw_ts}.".encode() + signed_body
    expected = hmac.digest(state.key, signed, "sha256")
    if not any(hmac.compare_digest(expected, c) for c in candidates):
        detail = "no signature matches"
        if "leaky-errors" in bugs:
            detail += f"; expected v1,{base64.b64encode(expected).decode()}"
        return _problem(state, 401, "signature-mismatch", detail)
    return None


def plain_receiver(
    secret: str,
    *,
    bugs: frozenset[str] = frozenset(),
    db_path: str = ":memory:",
    tolerance: int = 300,
) -> Starlette:
    """A Standard Webhooks receiver on ``POST /webhooks`` with the probe on
    ``GET /_hookproof/events/{event_id}``; ``bugs`` are names from :data:`BROKEN`."""
    unknown = bugs - set(BROKEN)
    assert not unknown, unknown
    db = sqlite3.connect(db_path, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL") if db_path != ":memory:" else None
    _schema(db)
    state = _State(db, base64.b64decode(secret.removeprefix("whsec_")), bugs, tolerance)

    def apply(key: str, event_id: str) -> None:
        with_tx = db.execute
        with_tx("BEGIN IMMEDIATE")
        with_tx("INSERT INTO effects VALUES (?)", (event_id,))
        with_tx("UPDATE inbox SET state='committed', status=200 WHERE key=?", (key,))
        with_tx("COMMIT")

    async def webhook(request: Request) -> Response:
        body = await request.body()
        headers = request.headers
        event_id = headers.get("webhook-id", "")
        if "slow" in bugs:
            state.never = state.never or asyncio.Event()
            await state.never.wait()
        for key in list(state.pending):  # ack-before-commit: commit what the last one promised
            state.pending.remove(key)
            apply(key, key)
        if "dedupe-before-verify" in bugs:
            row = db.execute("SELECT state FROM inbox WHERE key=?", (event_id,)).fetchone()
            if row is not None and row[0] == "committed":
                return JSONResponse({"status": "already applied"})
        refusal = _verify(state, headers, body)
        if refusal is not None:
            return refusal
        try:
            document = json.loads(body)
        except ValueError:
            return _problem(state, 400, "invalid-payload", "the body is not JSON")
        if "rejects-generic-event" in bugs and document.get("type") not in KNOWN_TYPES:
            return _problem(state, 422, "unknown-type", "unknown event type")
        key = hashlib.sha256(body).hexdigest() if "dedupe-on-body-hash" in bugs else event_id
        if "no-dedupe" in bugs:
            key = f"{event_id}#{next(state.serial)}"
        if "check-then-insert-race" in bugs:
            row = db.execute("SELECT state FROM inbox WHERE key=?", (key,)).fetchone()
            await asyncio.sleep(0)  # yield between check and insert: the race window
            if row is None:
                db.execute(
                    "INSERT OR REPLACE INTO inbox VALUES (?, ?, 'in_flight', NULL, 1)",
                    (key, event_id),
                )
                await asyncio.sleep(0)
                apply(key, event_id)
            return JSONResponse({"status": "ok"})
        db.execute("BEGIN IMMEDIATE")
        row = db.execute("SELECT state FROM inbox WHERE key=?", (key,)).fetchone()
        if row is None:
            db.execute("INSERT INTO inbox VALUES (?, ?, 'in_flight', NULL, 1)", (key, event_id))
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
            extra = {} if "in-flight-no-retry-after" in bugs else {"retry-after": "1"}
            return Response(status_code=503, headers=extra)
        if "ack-before-commit" in bugs:
            state.pending.append(key)
            return JSONResponse({"status": "accepted"})
        for _ in range(3):
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
