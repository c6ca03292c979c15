// Webhook receivers written in Node the way their documentation shows (express, the npm
// `standardwebhooks` package), one correct and several with one realistic bug each, for
// hookproof's conformance tests (tests/conformance/test_node_receivers.py).
//
// One process serves every variant: POST /<variant>/webhooks and the probe contract on
// GET /<variant>/_hookproof/events/:id (bearer PROBE_TOKEN), each variant with an inbox of its
// own. Environment: SECRETS (comma-separated whsec_ secrets, tried in order), PROBE_TOKEN,
// MAX_BODY (bytes), PORT (0: any free port). Prints "listening <port>" once it listens.
"use strict";

const crypto = require("node:crypto");
const express = require("express");
const { Webhook, WebhookVerificationError } = require("standardwebhooks");

const SECRETS = (process.env.SECRETS || "").split(",").filter(Boolean);
const PROBE_TOKEN = process.env.PROBE_TOKEN || "probe-token-for-tests";
const MAX_BODY = Number(process.env.MAX_BODY || 1048576);
const TOLERANCE_S = 300;

// Each bug in words (the Python side reads the names from BUGS in the test module).
const BUGS = {
  "timing-safe-equal": "crypto.timingSafeEqual without a length check: throws on 16/48 bytes",
  "express-json": "verifies JSON.stringify(req.body) after express.json(), not the raw bytes",
  "tolerance-in-ms": "a tolerance of 300 * 1000 compared with seconds: accepts days-old requests",
  "no-await-commit": "answers 200, then commits (the write is not awaited)",
  "seen-before-verify": "adds the id to a seen set before verifying",
  "first-entry-only": "checks only header.split(' ')[0]",
  "dedupe-on-signature": "deduplicates on webhook-id + webhook-signature",
  "in-flight-500": "throws (500) when a copy arrives while the first is in flight",
  "future-unbounded": "checks only that the timestamp is not too old",
  "only-first-secret": "builds one Webhook from the first secret only",
  "narrow-catch": "catches only WebhookVerificationError: the library's JSON.parse throws a 500",
  "catch-all-200": "answers 200 to every refusal so that the sender stops retrying",
  "header-case": "reads req.headers['Webhook-Id'] (Node lower-cases header names)",
  "starts-with": "compares the base64 strings with expected.startsWith(sig): a prefix passes",
  "lowercase-compare": "compares sig.toLowerCase() with the expected base64 lower-cased",
  "default-limit": "express.raw() without a limit: express's 100kb default, below the limit declared",
  "lowercase-key": "normalises the dedupe key with eventId.toLowerCase()",
  "queue-every-copy": "queued, but a committed duplicate is queued again (\"the worker dedupes\")",
  "lru-cache": "keeps its dedupe keys in an LRU cache of the 50 most recent events (in memory)",
  "close-abandon":
    "stops working when the response closes before it is sent (the sender hung up), leaving " +
    "the id in flight: every retry is 503",
  "strict-content-type":
    "answers 415 unless req.headers['content-type'] === 'application/json' (a charset fails)",
  "tenant-from-body":
    "reads JSON.parse(body).data.tenant to pick the tenant before verifying (a SyntaxError is " +
    "caught; null, a list or a number throws a 500)",
};
const LRU_SIZE = 50;

// Correct variants: "correct" applies the effect before it answers; "queued" answers once the
// event is recorded and applies the effect from a queue afterwards, as Stripe's and Svix's docs
// recommend (a worker takes the jobs every QUEUE_POLL_MS).
const CORRECT = ["correct", "queued"];
const QUEUED = new Set(["queued", "queue-every-copy"]);
const QUEUE_POLL_MS = 20;
const SLOW_WORK_MS = 250;

const tick = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function problem(res, status, slug, title) {
  res
    .status(status)
    .type("application/problem+json")
    .send(JSON.stringify({ type: `https://example.test/problems/${slug}`, title, status }));
}

// Hand-rolled Standard Webhooks verification, for the bugs that live in it.
function handVerify(bug, headers, raw) {
  const id = bug === "header-case" ? headers["Webhook-Id"] : headers["webhook-id"];
  const ts = headers["webhook-timestamp"];
  const header = headers["webhook-signature"];
  if (!id || !ts || !header) return [400, "missing-header"];
  if (!/^[0-9]{1,12}$/.test(ts)) return [400, "malformed-header"];
  const now = Math.floor(Date.now() / 1000);
  const stamp = Number(ts);
  const tolerance = bug === "tolerance-in-ms" ? TOLERANCE_S * 1000 : TOLERANCE_S;
  if (now - stamp > tolerance) return [401, "timestamp-outside-tolerance"];
  if (bug !== "future-unbounded" && stamp - now > tolerance) {
    return [401, "timestamp-outside-tolerance"];
  }
  const content = bug === "express-json" ? JSON.stringify(raw) : raw.toString("latin1");
  let entries = header.split(" ");
  if (bug === "first-entry-only") entries = entries.slice(0, 1);
  for (const secret of SECRETS) {
    const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
    const expected = crypto
      .createHmac("sha256", key)
      .update(Buffer.concat([Buffer.from(`${id}.${ts}.`), Buffer.from(content, "latin1")]))
      .digest();
    for (const entry of entries) {
      const [version, sig] = entry.split(",");
      if (version !== "v1" || !sig) continue;
      if (bug === "starts-with") {
        if (expected.toString("base64").startsWith(sig)) return null; // a prefix matches too
        continue;
      }
      if (bug === "lowercase-compare") {
        // A habit from hex signatures, where case means nothing; in base64 it is other bytes.
        if (expected.toString("base64").toLowerCase() === sig.toLowerCase()) return null;
        continue;
      }
      const given = Buffer.from(sig, "base64");
      if (bug === "timing-safe-equal") {
        if (crypto.timingSafeEqual(given, expected)) return null; // throws on a length mismatch
      } else if (given.length === expected.length && crypto.timingSafeEqual(given, expected)) {
        return null;
      }
    }
  }
  return [401, "signature-mismatch"];
}

const HAND_ROLLED = new Set([
  "timing-safe-equal",
  "express-json",
  "tolerance-in-ms",
  "first-entry-only",
  "future-unbounded",
  "header-case",
  "starts-with",
  "lowercase-compare",
]);

// The documented way: new Webhook(secret).verify(payload, headers), one Webhook per secret.
function libraryVerify(bug, headers, raw) {
  const secrets = bug === "only-first-secret" ? SECRETS.slice(0, 1) : SECRETS;
  let last = [400, "malformed-header"];
  for (const secret of secrets) {
    try {
      new Webhook(secret).verify(raw, headers);
      return null;
    } catch (error) {
      if (bug === "narrow-catch" && !(error instanceof WebhookVerificationError)) throw error;
      last = [400, "verification-failed"];
    }
  }
  return last;
}

function variant(bug) {
  const router = express.Router();
  const inbox = new Map(); // key -> {eventId, state, deliveries}
  const effects = new Map(); // eventId -> count
  const seen = new Set();
  const unawaited = []; // no-await-commit: writes under way, landing at the next request
  const jobs = []; // queued variants: event ids whose effect the worker still owes
  const apply = (eventId) => effects.set(eventId, (effects.get(eventId) || 0) + 1);
  if (QUEUED.has(bug)) setInterval(() => jobs.splice(0).forEach(apply), QUEUE_POLL_MS).unref();
  const land = () => unawaited.splice(0).forEach((write) => write());
  let parser = express.raw({ type: () => true, limit: MAX_BODY });
  if (bug === "express-json") parser = express.json({ limit: MAX_BODY });
  if (bug === "default-limit") parser = express.raw({ type: () => true }); // 100kb

  router.post("/webhooks", parser, async (req, res, next) => {
    land();
    try {
      const raw = Buffer.isBuffer(req.body) ? req.body : req.body || {};
      const eventId = req.headers["webhook-id"] || "";
      if (bug === "strict-content-type" && req.headers["content-type"] !== "application/json") {
        return problem(res, 415, "unsupported-media-type", "send application/json");
      }
      if (bug === "tenant-from-body") {
        let peeked;
        try {
          peeked = JSON.parse(raw.toString("utf8"));
        } catch (error) {
          return problem(res, 400, "invalid-payload", "the body is not JSON");
        }
        req.tenant = peeked.data.tenant || "default"; // TypeError when there is no .data
      }
      if (bug === "seen-before-verify") {
        if (seen.has(eventId)) return res.json({ status: "duplicate" });
        seen.add(eventId);
      }
      const refusal = HAND_ROLLED.has(bug)
        ? handVerify(bug, req.headers, raw)
        : libraryVerify(bug, req.headers, raw);
      if (refusal) {
        if (bug === "catch-all-200") return res.json({ status: "ignored" });
        return problem(res, refusal[0], refusal[1], "the delivery was refused");
      }
      let document;
      if (bug === "express-json") {
        document = raw;
      } else {
        try {
          document = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(raw));
        } catch (error) {
          return problem(res, 400, "invalid-payload", "the body is not UTF-8 JSON");
        }
      }
      if (document === null || typeof document !== "object" || Array.isArray(document)) {
        return problem(res, 400, "invalid-payload", "the body is not a JSON object");
      }
      let key = eventId;
      if (bug === "dedupe-on-signature") key = `${eventId} ${req.headers["webhook-signature"]}`;
      if (bug === "lowercase-key") key = eventId.toLowerCase();
      const known = inbox.get(key);
      if (known) {
        known.deliveries += 1;
        if (known.state === "committed") {
          if (bug === "queue-every-copy") jobs.push(eventId);
          return res.json({ status: "already applied" });
        }
        if (bug === "in-flight-500") {
          known.copyArrived();
          throw new Error("unique constraint failed: inbox.key");
        }
        res.set("Retry-After", "1");
        return problem(res, 503, "in-flight", "the first copy is being processed");
      }
      const row = { eventId, state: "in_flight", deliveries: 1 };
      inbox.set(key, row);
      if (bug === "lru-cache" && inbox.size > LRU_SIZE) inbox.delete(inbox.keys().next().value);
      const commit = () => {
        apply(eventId);
        row.state = "committed";
      };
      if (QUEUED.has(bug)) {
        row.state = "committed"; // recorded, with its job: the worker applies the effect later
        jobs.push(eventId);
        return res.json({ status: "queued" });
      }
      if (bug === "no-await-commit") {
        // The write is not awaited: it lands only after the next request (the probe read right
        // after this 200, or another delivery), however fast or busy the machine is.
        unawaited.push(commit);
        return res.json({ status: "accepted" });
      }
      if (bug === "in-flight-500") {
        // The handler's work lasts until a second copy has arrived (at most 2 s), so concurrent
        // copies overlap even when a busy machine spreads their arrivals out.
        await new Promise((resolve) => {
          row.copyArrived = resolve;
          setTimeout(resolve, 2000);
        });
      }
      let hungUp = false;
      if (bug === "close-abandon") {
        // A slow write (up to SLOW_WORK_MS) that a hang-up interrupts: long enough that the
        // sender's close reaches it however loaded the machine (5 ms was a race).
        await new Promise((resolve) => {
          res.on("close", () => {
            hungUp = !res.writableFinished;
            resolve();
          });
          setTimeout(resolve, SLOW_WORK_MS);
        });
      }
      await tick(5); // the handler's work: concurrent copies overlap here
      if (hungUp) return undefined; // "nobody is waiting for the answer": the row stays in flight
      commit();
      return res.json({ status: "applied" });
    } catch (error) {
      return next(error);
    }
  });

  router.get("/_hookproof/events/:id", (req, res) => {
    if (req.headers.authorization !== `Bearer ${PROBE_TOKEN}`) return res.sendStatus(401);
    const eventId = req.params.id;
    const rows = [...inbox.values()].filter((row) => row.eventId === eventId);
    const count = effects.get(eventId) || 0;
    res.on("finish", land);
    if (!rows.length && !count) return res.sendStatus(404);
    const status = rows.every((row) => row.state === "committed") ? "committed" : "in_flight";
    const deliveries = rows.reduce((sum, row) => sum + row.deliveries, 0);
    return res.json({ event_id: eventId, status, effects: count, deliveries });
  });
  return router;
}

const app = express();
for (const name of [...CORRECT, ...Object.keys(BUGS)]) app.use(`/${name}`, variant(name));
app.use((error, req, res, next) => {
  const status = error.status || error.statusCode || 500;
  problem(res, status, status === 413 ? "body-too-large" : "error", error.message);
});

const server = app.listen(Number(process.env.PORT || 0), "127.0.0.1", () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
