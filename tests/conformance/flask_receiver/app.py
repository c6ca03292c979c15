"""A zoo of Flask (WSGI) webhook receivers, served by waitress, for ``hookproof check``.

One WSGI app serves every variant under its own prefix: ``POST /<variant>/webhooks`` takes
deliveries, ``GET /<variant>/_hookproof/events/<event_id>`` is the probe of docs/receiver.md
(``Authorization: Bearer <token>``). Each variant keeps a SQLite file of its own in the data
directory: the dedupe table ``inbox``, the business effect ``effects`` (one row per event, ``n``
counts applications) and ``deliveries`` (authentic copies that arrived).

Verification uses the libraries as their documentation shows: ``standardwebhooks.Webhook.verify``
and ``stripe.Webhook.construct_event`` / ``stripe.WebhookSignature.verify_header``.

Variants (one realistic Flask bug each, apart from the docs and correct ones):

| variant | scheme | what it does |
|---|---|---|
| std-docs | standard | the library README sample: ``wh.verify(request.get_data(), request.headers)``, only ``WebhookVerificationError`` caught (400), one secret, dedupe ``INSERT OR IGNORE`` + effect in one ``BEGIN IMMEDIATE`` |
| stripe-docs | stripe | Stripe's Flask sample: ``request.data``, ``request.headers['STRIPE_SIGNATURE']``, ``ValueError`` / ``SignatureVerificationError`` → 400, one secret, same dedupe |
| std-correct | standard | careful: every exception caught, problem+json 4xx, body limit, several secrets, strict JSON, in-flight claim (503 + Retry-After), 2xx only after the commit |
| stripe-correct | stripe | the same care around ``verify_header`` (plus the future-timestamp check the library lacks) |
| std-json-reserialised | standard | verifies ``json.dumps(request.get_json())`` instead of the raw bytes |
| std-form-consumed | standard | touches ``request.form`` first, then verifies ``request.stream.read()`` |
| std-environ-key | standard | dedupe key ``request.environ.get('WEBHOOK_ID')`` (the WSGI key is ``HTTP_WEBHOOK_ID``): every event is keyed ``None`` |
| std-narrow-except | standard | ``except WebhookVerificationError`` only: the library's ValueError / binascii.Error / UnicodeDecodeError / JSONDecodeError become Flask's 500 |
| std-integrity-after-work | standard | applies the effect, then ``INSERT`` into the inbox and treats ``sqlite3.IntegrityError`` as "duplicate" |
| std-check-then-insert | standard | ``SELECT`` then work then ``INSERT OR IGNORE``, no transaction across the threads |
| std-thread-ack | standard | ``threading.Thread(target=process).start()`` then 200 |
| std-first-secret | standard | only the first configured secret |
| std-latin1 | standard | ``request.get_data(as_text=True).encode('latin-1')`` |
| std-no-max-content | standard | no body limit at all (``MAX_CONTENT_LENGTH`` unset) |
| std-get-json-first | standard | reads ``request.get_json(force=True)["type"]`` before verifying: ``null``, a list or JSON nested past the recursion limit (``RecursionError``, which ``get_json`` does not turn into a 400) is a 500 |
| std-abort-unknown | standard | ``abort(500)`` on an event type it has no handler for |
| std-locked-500 | standard | SQLite connection with ``timeout=0``: ``database is locked`` under concurrent threads is a 500 |
| std-mark-first | standard | marks the event processed (committed) before the work, so a concurrent copy gets 200 early |
| stripe-tolerance | stripe | ``construct_event(..., tolerance=0)`` ("strict"), which turns the timestamp check off |
| stripe-first-secret | stripe | only the first configured secret |
| stripe-json-reserialised | stripe | verifies ``json.dumps(request.get_json())`` |
| stripe-object-key | stripe | deduplicates on ``event["data"]["object"]["id"]`` ("each invoice once"): a second, distinct event about the same object is answered as a duplicate and lost |
| std-queued | standard | as Stripe's and Svix's docs recommend: the careful receiver, but the 2xx follows a commit of the inbox record together with a row in a ``jobs`` table; a worker thread applies the effect from the queue afterwards (effect + job deleted in one transaction) |
| std-queued-every-copy | standard | queued, but every authentic copy is recorded with ``INSERT OR IGNORE`` and enqueued, duplicates too: the dedupe was left to a worker that does not do it |
| std-queued-in-memory | standard | queued on a ``queue.Queue`` in memory after the inbox commit: a crash between the answer and the effect loses it |
| std-payload-jsonb | standard | the careful receiver, but it first keeps every verified event in a PostgreSQL ``jsonb`` table (psycopg's ``Jsonb``), as an events table often is: PostgreSQL refuses a ``\\u0000`` escape there, and the error is Flask's 500 on every retry |

Config by environment: ``FLASKZOO_SECRETS`` (space separated), ``FLASKZOO_PROBE_TOKEN``,
``FLASKZOO_DATA_DIR``, ``FLASKZOO_PORT`` (0: any free port, printed), ``FLASKZOO_MAX_BODY``
(bytes, default 1 MiB), ``FLASKZOO_WORK_SECONDS`` (the time the business effect takes: a call
to a downstream system; default 0.02), ``FLASKZOO_QUEUE_POLL_SECONDS`` (how often the queued
variants' worker looks for jobs; default 0.02), ``FLASKZOO_POSTGRES_DSN`` and
``FLASKZOO_POSTGRES_TABLE`` (std-payload-jsonb's server and table; without them that variant
answers 503).
"""

# ruff: noqa: E501 -- the bug table above keeps one variant per line

from __future__ import annotations

import hmac
import json
import os
import queue
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import stripe
from flask import Flask, Request, Response, abort, jsonify, request
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

SECRETS = os.environ.get("FLASKZOO_SECRETS", "").split()
PROBE_TOKEN = os.environ.get("FLASKZOO_PROBE_TOKEN", "")
DATA_DIR = Path(os.environ.get("FLASKZOO_DATA_DIR", "flaskzoo-data"))
MAX_BODY = int(os.environ.get("FLASKZOO_MAX_BODY", str(1024 * 1024)))
WORK_SECONDS = float(os.environ.get("FLASKZOO_WORK_SECONDS", "0.02"))
QUEUE_POLL_SECONDS = float(os.environ.get("FLASKZOO_QUEUE_POLL_SECONDS", "0.02"))
TOLERANCE = 300
LEASE_SECONDS = 30
KNOWN_EVENT_TYPES = ("invoice.paid", "customer.created", "payment_intent.succeeded")

SCHEMA = """
CREATE TABLE IF NOT EXISTS inbox (event_id TEXT PRIMARY KEY, status TEXT NOT NULL,
                                  claimed_at REAL, answer INTEGER);
CREATE TABLE IF NOT EXISTS effects (event_id TEXT PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS deliveries (event_id TEXT PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL);
"""


class Refusal(Exception):
    """A 4xx/5xx the careful receivers answer as application/problem+json."""

    def __init__(self, status: int, slug: str, detail: str, retry_after: int | None = None):
        super().__init__(detail)
        self.status, self.slug, self.detail, self.retry_after = status, slug, detail, retry_after


def problem(refusal: Refusal) -> Response:
    body = {
        "type": f"https://hookproof.dev/problems/{refusal.slug}",
        "title": refusal.slug.replace("-", " "),
        "status": refusal.status,
        "detail": refusal.detail,
    }
    response = Response(json.dumps(body), refusal.status, mimetype="application/problem+json")
    if refusal.retry_after is not None:
        response.headers["Retry-After"] = str(refusal.retry_after)
    return response


@contextmanager
def connect(variant: str, timeout: float = 30.0) -> Iterator[sqlite3.Connection]:
    """A new autocommit connection to the variant's file (explicit transactions), closed after."""
    conn = sqlite3.connect(DATA_DIR / f"{variant}.sqlite", timeout=timeout, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous=FULL")
        yield conn
    finally:
        conn.close()


def apply_effect(
    conn: sqlite3.Connection, event_id: str, work_seconds: float = WORK_SECONDS
) -> None:
    """The business effect: a downstream call (``work_seconds``), then one row per event."""
    time.sleep(work_seconds)  # real-time: the downstream call a real handler waits on
    conn.execute(
        "INSERT INTO effects VALUES (?, 1) ON CONFLICT(event_id) DO UPDATE SET n = n + 1",
        (event_id,),
    )


def count_delivery(variant: str, event_id: str) -> None:
    with connect(variant) as conn:
        conn.execute(
            "INSERT INTO deliveries VALUES (?, 1) ON CONFLICT(event_id) DO UPDATE SET n = n + 1",
            (event_id,),
        )


def strict_json(body: bytes) -> dict[str, Any]:
    """Parse UTF-8 JSON the way a careful team does: no BOM, no NaN, no duplicate names."""

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        names = [name for name, _ in pairs]
        if len(set(names)) != len(names):
            raise ValueError("duplicate member name")
        return dict(pairs)

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    def finite(text: str) -> float:
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise ValueError("number overflows a double")
        return value

    try:
        text = body.decode("utf-8")
        if text.startswith("\ufeff"):
            raise ValueError("byte order mark")
        document = json.loads(
            text, object_pairs_hook=no_duplicates, parse_constant=no_constant, parse_float=finite
        )
        json.dumps(document, ensure_ascii=False).encode("utf-8")  # lone surrogates fail here
    except (ValueError, RecursionError) as error:
        raise Refusal(400, "invalid-payload", f"body is not JSON: {error}") from None
    if not isinstance(document, dict):
        raise Refusal(400, "invalid-payload", "body is not a JSON object")
    return document


# --- the documented samples ------------------------------------------------------------------


def dedupe_and_apply(variant: str, event_id: str) -> None:
    """What teams bolt onto the samples: INSERT OR IGNORE + the effect in one transaction."""
    with connect(variant) as conn:
        conn.execute("BEGIN IMMEDIATE")
        inserted = conn.execute(
            "INSERT OR IGNORE INTO inbox VALUES (?, 'committed', NULL, 200)", (event_id,)
        ).rowcount
        if inserted:
            apply_effect(conn, event_id)
        conn.execute("COMMIT")


def std_docs() -> Any:
    wh = Webhook(SECRETS[0])
    try:
        payload = wh.verify(request.get_data(), request.headers)
    except WebhookVerificationError:
        return jsonify(error="invalid signature"), 400
    event_id = request.headers["webhook-id"]
    count_delivery("std-docs", event_id)
    dedupe_and_apply("std-docs", event_id)
    return jsonify(received=True, type=payload.get("type"))


def stripe_docs() -> Any:
    payload = request.data
    sig_header = request.headers["STRIPE_SIGNATURE"]
    try:
        event = stripe.Webhook.construct_event(payload, sig_header, SECRETS[0])
    except ValueError as e:
        print(f"Error parsing payload: {e}", file=sys.stderr)
        return jsonify(success=False), 400
    except stripe.SignatureVerificationError as e:
        print(f"Error verifying webhook signature: {e}", file=sys.stderr)
        return jsonify(success=False), 400
    count_delivery("stripe-docs", event["id"])
    dedupe_and_apply("stripe-docs", event["id"])
    return jsonify(success=True)


# --- the careful receivers, and their one-bug variants ----------------------------------------


class CarefulStandard:
    """Standard Webhooks done with care; each bug variant overrides exactly one step."""

    variant = "std-correct"
    db_timeout = 30.0
    work_seconds = WORK_SECONDS

    def secrets(self) -> list[str]:
        return SECRETS

    def check_size(self, req: Request) -> None:
        req.max_content_length = MAX_BODY  # werkzeug answers 413 while reading past it
        if req.content_length is not None and req.content_length > MAX_BODY:
            raise Refusal(413, "body-too-large", f"body over {MAX_BODY} bytes")

    def raw_body(self, req: Request) -> bytes:
        return req.get_data(cache=True)

    def header(self, req: Request, name: str) -> str:
        values = req.headers.getlist(name)
        if not values:
            raise Refusal(400, "missing-header", f"{name} is missing")
        if len(values) > 1 or (name != "webhook-signature" and "," in values[0]):
            raise Refusal(400, "ambiguous-header", f"{name} given more than once")
        return values[0]

    def verify(self, req: Request, body: bytes) -> tuple[str, dict[str, Any]]:
        headers = {
            name: self.header(req, name)
            for name in ("webhook-id", "webhook-timestamp", "webhook-signature")
        }
        mismatch = "no secret matched"
        for secret in self.secrets():
            try:
                Webhook(secret).verify(body, headers, json_parse=False)
                return headers["webhook-id"], strict_json(body)
            except WebhookVerificationError as error:
                if "timestamp" in str(error) or "Signature Headers" in str(error):
                    status = 400 if "Signature Headers" in str(error) else 401
                    slug = "malformed-header" if status == 400 else "timestamp-outside-tolerance"
                    raise Refusal(status, slug, str(error)) from None
                mismatch = str(error)
            except (ValueError, TypeError) as error:  # binascii.Error, UnicodeDecodeError
                raise Refusal(400, "malformed-header", f"cannot verify: {error}") from None
        raise Refusal(401, "signature-mismatch", mismatch)

    def dedupe_key(self, req: Request, event_id: str) -> str:
        return event_id

    def claim(self, conn: sqlite3.Connection, event_id: str) -> Response | None:
        """Take the event, or say why not (committed: the stored answer; in flight: 503)."""
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute(
            "SELECT status, claimed_at, answer FROM inbox WHERE event_id = ?", (event_id,)
        ).fetchone()
        now = time.time()
        if row is not None and row[0] == "committed":
            conn.execute("COMMIT")
            return Response(
                json.dumps({"event_id": event_id, "duplicate": True, "status": row[2]}),
                row[2],
                mimetype="application/json",
            )
        if row is not None and row[1] is not None and now - row[1] < LEASE_SECONDS:
            conn.execute("COMMIT")
            left = max(1, int(LEASE_SECONDS - (now - row[1])))
            raise Refusal(503, "in-flight", "another copy is being handled", retry_after=left)
        conn.execute(
            "INSERT INTO inbox VALUES (?, 'in_flight', ?, NULL) ON CONFLICT(event_id) "
            "DO UPDATE SET status = 'in_flight', claimed_at = excluded.claimed_at",
            (event_id, now),
        )
        conn.execute("COMMIT")
        return None

    def event_type_check(self, payload: dict[str, Any]) -> None:
        return None

    def keep(self, event_id: str, payload: dict[str, Any]) -> None:
        """Keep the verified event before handling it (the careful receivers keep nothing)."""
        return None

    def process(self, conn: sqlite3.Connection, event_id: str) -> Response:
        """The effect and the inbox record commit together, then the 2xx."""
        try:
            conn.execute("BEGIN IMMEDIATE")
            apply_effect(conn, event_id, self.work_seconds)
            conn.execute(
                "UPDATE inbox SET status = 'committed', claimed_at = NULL, answer = 200 "
                "WHERE event_id = ?",
                (event_id,),
            )
            conn.execute("COMMIT")
        except Exception:
            conn.execute("ROLLBACK") if conn.in_transaction else None
            conn.execute("UPDATE inbox SET claimed_at = NULL WHERE event_id = ?", (event_id,))
            raise Refusal(503, "handler-failed", "try again later", retry_after=1) from None
        return jsonify(received=True, event_id=event_id)

    def handle(self, req: Request) -> Response:
        try:
            self.check_size(req)
            body = self.raw_body(req)
            event_id, payload = self.verify(req, body)
            key = self.dedupe_key(req, event_id)
            count_delivery(self.variant, event_id)
            self.event_type_check(payload)
            self.keep(event_id, payload)
            with connect(self.variant, self.db_timeout) as conn:
                answered = self.claim(conn, key)
                if answered is not None:
                    return answered
                return self.process(conn, key)
        except Refusal as refusal:
            return problem(refusal)
        except sqlite3.OperationalError as error:
            if self.db_timeout == 0:
                raise  # std-locked-500: Flask turns it into a 500
            return problem(Refusal(503, "inbox-unavailable", str(error), retry_after=1))


class CarefulStripe(CarefulStandard):
    """Stripe-style done with care: verify_header per secret, both-sided tolerance."""

    variant = "stripe-correct"
    tolerance: int | None = TOLERANCE

    def verify(self, req: Request, body: bytes) -> tuple[str, dict[str, Any]]:
        header = self.header(req, "Stripe-Signature")
        fields = [item.split("=", 1) for item in header.split(",")]
        stamps = [value for name, *value in fields if name == "t"]
        if len(stamps) != 1 or not stamps[0] or not stamps[0][0].isdigit():
            raise Refusal(400, "malformed-header", "Stripe-Signature needs exactly one t=")
        if self.tolerance and int(stamps[0][0]) > time.time() + self.tolerance:
            raise Refusal(401, "timestamp-outside-tolerance", "timestamp in the future")
        mismatch = "no secret matched"
        for secret in self.secrets():
            try:
                stripe.WebhookSignature.verify_header(body, header, secret, self.tolerance)
                break
            except stripe.SignatureVerificationError as error:
                if "tolerance" in str(error):
                    raise Refusal(401, "timestamp-outside-tolerance", str(error)) from None
                mismatch = str(error).split(".")[0]
            except ValueError as error:  # a body that is not UTF-8
                raise Refusal(400, "invalid-payload", f"cannot verify: {error}") from None
        else:
            raise Refusal(401, "signature-mismatch", mismatch)
        payload = strict_json(body)
        event_id = payload.get("id")
        if not isinstance(event_id, str) or not event_id:
            raise Refusal(400, "invalid-payload", "the event has no id")
        return event_id, payload

    def header(self, req: Request, name: str) -> str:
        values = req.headers.getlist(name)
        if not values:
            raise Refusal(400, "missing-header", f"{name} is missing")
        if len(values) > 1:
            raise Refusal(400, "ambiguous-header", f"{name} given more than once")
        return values[0]


class JsonReserialised(CarefulStandard):
    variant = "std-json-reserialised"

    def raw_body(self, req: Request) -> bytes:
        return json.dumps(req.get_json(force=True, silent=True)).encode()


class FormConsumed(CarefulStandard):
    variant = "std-form-consumed"

    def raw_body(self, req: Request) -> bytes:
        req.form  # a logging middleware looked at the form fields first  # noqa: B018
        return req.stream.read()


class GetJsonFirst(CarefulStandard):
    variant = "std-get-json-first"
    last_type: str | None = None

    def raw_body(self, req: Request) -> bytes:
        self.last_type = req.get_json(force=True)["type"]  # for the log line, before verifying
        return req.get_data(cache=True)


class EnvironKey(CarefulStandard):
    variant = "std-environ-key"

    def dedupe_key(self, req: Request, event_id: str) -> str:
        return str(dict(req.environ).get("WEBHOOK_ID"))


class NarrowExcept(CarefulStandard):
    variant = "std-narrow-except"

    def verify(self, req: Request, body: bytes) -> tuple[str, dict[str, Any]]:
        for secret in self.secrets():
            try:
                payload = Webhook(secret).verify(body, req.headers)
                return req.headers["webhook-id"], payload
            except WebhookVerificationError:
                continue
        raise Refusal(401, "signature-mismatch", "no secret matched")


class IntegrityAfterWork(CarefulStandard):
    variant = "std-integrity-after-work"

    def claim(self, conn: sqlite3.Connection, event_id: str) -> Response | None:
        return None

    def process(self, conn: sqlite3.Connection, event_id: str) -> Response:
        apply_effect(conn, event_id)
        try:
            conn.execute("INSERT INTO inbox VALUES (?, 'committed', NULL, 200)", (event_id,))
        except sqlite3.IntegrityError:
            return jsonify(received=True, duplicate=True)
        return jsonify(received=True, event_id=event_id)


class CheckThenInsert(CarefulStandard):
    variant = "std-check-then-insert"

    def claim(self, conn: sqlite3.Connection, event_id: str) -> Response | None:
        seen = conn.execute("SELECT 1 FROM inbox WHERE event_id = ?", (event_id,)).fetchone()
        return jsonify(received=True, duplicate=True) if seen else None

    def process(self, conn: sqlite3.Connection, event_id: str) -> Response:
        apply_effect(conn, event_id)
        conn.execute("INSERT OR IGNORE INTO inbox VALUES (?, 'committed', NULL, 200)", (event_id,))
        return jsonify(received=True, event_id=event_id)


class ThreadAck(CarefulStandard):
    variant = "std-thread-ack"

    def process(self, conn: sqlite3.Connection, event_id: str) -> Response:
        def work() -> None:
            with connect(self.variant) as own:
                CarefulStandard.process(self, own, event_id)

        threading.Thread(target=work, daemon=True).start()
        return jsonify(received=True, event_id=event_id)


class FirstSecret(CarefulStandard):
    variant = "std-first-secret"

    def secrets(self) -> list[str]:
        return SECRETS[:1]


class Latin1(CarefulStandard):
    variant = "std-latin1"

    def raw_body(self, req: Request) -> bytes:
        try:
            return req.get_data(as_text=True).encode("latin-1")
        except UnicodeEncodeError:
            abort(500)


class NoMaxContent(CarefulStandard):
    variant = "std-no-max-content"

    def check_size(self, req: Request) -> None:
        return None


class AbortUnknown(CarefulStandard):
    variant = "std-abort-unknown"

    def event_type_check(self, payload: dict[str, Any]) -> None:
        if payload.get("type") not in KNOWN_EVENT_TYPES:
            abort(500)


class Locked500(CarefulStandard):
    variant = "std-locked-500"
    db_timeout = 0.0


class MarkFirst(CarefulStandard):
    variant = "std-mark-first"
    work_seconds = 0.2  # a slower handler: copies staggered through it surely meet the early mark

    def claim(self, conn: sqlite3.Connection, event_id: str) -> Response | None:
        inserted = conn.execute(
            "INSERT OR IGNORE INTO inbox VALUES (?, 'committed', NULL, 200)", (event_id,)
        ).rowcount
        return None if inserted else jsonify(received=True, duplicate=True)

    def process(self, conn: sqlite3.Connection, event_id: str) -> Response:
        apply_effect(conn, event_id, self.work_seconds)  # its own slower handler, not the default
        return jsonify(received=True, event_id=event_id)


class StripeTolerance(CarefulStripe):
    variant = "stripe-tolerance"
    tolerance = 0


class StripeFirstSecret(CarefulStripe):
    variant = "stripe-first-secret"

    def secrets(self) -> list[str]:
        return SECRETS[:1]


class StripeJsonReserialised(CarefulStripe):
    variant = "stripe-json-reserialised"

    def raw_body(self, req: Request) -> bytes:
        return json.dumps(req.get_json(force=True, silent=True)).encode()


class StripeObjectKey(CarefulStripe):
    variant = "stripe-object-key"

    def verify(self, req: Request, body: bytes) -> tuple[str, dict[str, Any]]:
        _, payload = super().verify(req, body)
        return str(payload["data"]["object"]["id"]), payload


class Queued(CarefulStandard):
    """Acknowledge once stored, process later: the inbox record and a job commit together."""

    variant = "std-queued"
    work_seconds = 0.005  # the worker's effect: a short downstream call, one job after another

    def process(self, conn: sqlite3.Connection, event_id: str) -> Response:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "UPDATE inbox SET status = 'committed', claimed_at = NULL, answer = 200 "
            "WHERE event_id = ?",
            (event_id,),
        )
        conn.execute("INSERT INTO jobs (event_id) VALUES (?)", (event_id,))
        conn.execute("COMMIT")
        return jsonify(received=True, event_id=event_id, queued=True)

    def work_off(self) -> None:
        """Apply every queued job: its effect and its deletion in one transaction."""
        with connect(self.variant) as conn:
            for job_id, event_id in conn.execute("SELECT id, event_id FROM jobs ORDER BY id"):
                conn.execute("BEGIN IMMEDIATE")
                apply_effect(conn, event_id, self.work_seconds)
                conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
                conn.execute("COMMIT")


class QueuedEveryCopy(Queued):
    variant = "std-queued-every-copy"

    def claim(self, conn: sqlite3.Connection, event_id: str) -> Response | None:
        return None  # "the worker deduplicates" (it does not)

    def process(self, conn: sqlite3.Connection, event_id: str) -> Response:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT OR IGNORE INTO inbox VALUES (?, 'committed', NULL, 200)", (event_id,))
        conn.execute("INSERT INTO jobs (event_id) VALUES (?)", (event_id,))
        conn.execute("COMMIT")
        return jsonify(received=True, event_id=event_id, queued=True)


class QueuedInMemory(Queued):
    variant = "std-queued-in-memory"

    def __init__(self) -> None:
        self.pending: queue.SimpleQueue[str] = queue.SimpleQueue()

    def process(self, conn: sqlite3.Connection, event_id: str) -> Response:
        conn.execute(
            "UPDATE inbox SET status = 'committed', claimed_at = NULL, answer = 200 "
            "WHERE event_id = ?",
            (event_id,),
        )
        self.pending.put(event_id)
        return jsonify(received=True, event_id=event_id, queued=True)

    def work_off(self) -> None:
        with connect(self.variant) as conn:
            while not self.pending.empty():
                event_id = self.pending.get()
                conn.execute("BEGIN IMMEDIATE")
                apply_effect(conn, event_id, self.work_seconds)
                conn.execute("COMMIT")


POSTGRES_DSN = os.environ.get("FLASKZOO_POSTGRES_DSN", "")
POSTGRES_TABLE = os.environ.get("FLASKZOO_POSTGRES_TABLE", "flaskzoo_events")


class PayloadJsonb(CarefulStandard):
    variant = "std-payload-jsonb"

    def keep(self, event_id: str, payload: dict[str, Any]) -> None:
        if not POSTGRES_DSN:
            raise Refusal(503, "events-table-unavailable", "no PostgreSQL configured")
        import psycopg
        from psycopg.types.json import Jsonb

        with psycopg.connect(POSTGRES_DSN, autocommit=True, connect_timeout=5) as pg:
            pg.execute(  # a \u0000 in the payload: psycopg.errors.UntranslatableCharacter
                f"INSERT INTO {POSTGRES_TABLE} VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (event_id, Jsonb(payload)),
            )


QUEUED: list[Queued] = [Queued(), QueuedEveryCopy(), QueuedInMemory()]


def work_queues() -> None:
    """The queued variants' worker: every ``QUEUE_POLL_SECONDS``, work off each one's jobs."""
    while True:
        time.sleep(QUEUE_POLL_SECONDS)  # real-time: a worker polling its queue
        for receiver in QUEUED:
            try:
                receiver.work_off()
            except sqlite3.Error as error:  # retried on the next poll
                print(f"{receiver.variant}: {error}", file=sys.stderr)


CAREFUL: list[CarefulStandard] = [
    CarefulStandard(),
    CarefulStripe(),
    JsonReserialised(),
    FormConsumed(),
    GetJsonFirst(),
    EnvironKey(),
    NarrowExcept(),
    IntegrityAfterWork(),
    CheckThenInsert(),
    ThreadAck(),
    FirstSecret(),
    Latin1(),
    NoMaxContent(),
    AbortUnknown(),
    Locked500(),
    MarkFirst(),
    StripeTolerance(),
    StripeFirstSecret(),
    StripeJsonReserialised(),
    StripeObjectKey(),
    PayloadJsonb(),
    *QUEUED,
]
HANDLERS: dict[str, Callable[[], Any]] = {"std-docs": std_docs, "stripe-docs": stripe_docs}
HANDLERS.update({receiver.variant: (lambda r=receiver: r.handle(request)) for receiver in CAREFUL})
VARIANTS = tuple(HANDLERS)
STRIPE_VARIANTS = tuple(name for name in VARIANTS if name.startswith("stripe-"))


def create_app() -> Flask:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    for variant in VARIANTS:
        with connect(variant) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(SCHEMA)
    if POSTGRES_DSN:
        import psycopg

        with psycopg.connect(POSTGRES_DSN, autocommit=True, connect_timeout=5) as pg:
            pg.execute(
                f"CREATE TABLE IF NOT EXISTS {POSTGRES_TABLE} "
                "(event_id text PRIMARY KEY, payload jsonb NOT NULL)"
            )
    threading.Thread(target=work_queues, name="queue-worker", daemon=True).start()
    app = Flask(__name__)

    @app.post("/<variant>/webhooks")
    def webhook(variant: str) -> Any:
        if variant not in HANDLERS:
            abort(404)
        return HANDLERS[variant]()

    @app.get("/<variant>/_hookproof/events/<event_id>")
    def probe(variant: str, event_id: str) -> Any:
        if variant not in HANDLERS:
            abort(404)
        given = request.headers.get("Authorization", "")
        if not PROBE_TOKEN or not hmac.compare_digest(given, f"Bearer {PROBE_TOKEN}"):
            return problem(Refusal(401, "unauthorized", "bearer token required"))
        with connect(variant) as conn:
            inbox = conn.execute(
                "SELECT status FROM inbox WHERE event_id = ?", (event_id,)
            ).fetchone()
            effects = conn.execute(
                "SELECT n FROM effects WHERE event_id = ?", (event_id,)
            ).fetchone()
            deliveries = conn.execute(
                "SELECT n FROM deliveries WHERE event_id = ?", (event_id,)
            ).fetchone()
        if inbox is None and effects is None and deliveries is None:
            return problem(Refusal(404, "not-found", "unknown event"))
        status = "committed" if inbox is not None and inbox[0] == "committed" else "in_flight"
        return jsonify(
            event_id=event_id,
            status=status,
            effects=effects[0] if effects else 0,
            deliveries=deliveries[0] if deliveries else 0,
        )

    return app


def main() -> None:
    import waitress

    port = int(os.environ.get("FLASKZOO_PORT", "0"))
    server = waitress.create_server(create_app(), host="127.0.0.1", port=port, threads=16)
    print(f"listening on http://127.0.0.1:{server.effective_port}", flush=True)  # type: ignore[union-attr]
    server.run()


if __name__ == "__main__":
    main()
