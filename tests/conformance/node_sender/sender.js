// A Standard Webhooks sender written in Node (stdlib only: node:http, node:https, node:crypto) the
// way a platform team writes one from the spec, one correct variant and several with one
// realistic bug each, for hookproof's conformance tests (tests/conformance/test_node_senders.py).
//
// The bugs, one line each (the Python side reads the names from BUGS below):
//
// | variant             | bug                                                                        |
// |---------------------|----------------------------------------------------------------------------|
// | new-id-per-retry    | webhook-id is a fresh UUID per attempt (the attempt id, not the message id) |
// | stale-signature     | headers built once before the loop: attempt 1's timestamp/signature reused  |
// | reserialized-body   | signs JSON.stringify(payload), sends JSON.stringify(payload, null, 2)       |
// | raw-whsec-key       | HMAC key = the whole "whsec_..." string, not its base64-decoded part        |
// | retry-any-4xx       | `if (!ok) retry`: 400/401/403/410/422 are retried like a 5xx                |
// | delay-in-seconds    | setTimeout(resolve, delaySeconds): milliseconds, an instant retry storm     |
// | backoff-not-awaited | `sleep(backoff)` without await (Retry-After's sleep is awaited): no backoff |
// | ignore-retry-after  | never reads Retry-After: follows its own backoff on 429                     |
// | retry-after-int     | parseInt(Retry-After) only: an HTTP date is NaN and ignored                 |
// | retry-after-429-only| reads Retry-After on 429 only: a 503's is ignored                          |
// | no-timeout          | no request timeout: waits as long as a silent receiver keeps the socket     |
// | timeout-not-aborted | Promise.race with a timer: retries on time but never closes the old request |
// | follow-redirects    | follows a 3xx Location (re-POSTs the signed body to wherever it points)     |
// | 3xx-as-success      | `status < 400` counts as delivered                                          |
// | slow-body-failure   | the timeout also covers reading the body: a 2xx with a slow body is failed  |
// | no-cap              | never gives up: max attempts ignored, nothing is dead-lettered              |
// | parallel-copies     | the API handler and the outbox poller both deliver the message at once      |
// | reset-as-delivered  | a connection reset after the body was written is counted as delivered      |
// | ms-timestamp        | webhook-timestamp = Date.now() (milliseconds, not seconds)                  |
// | attempt-in-body     | the payload carries "attempt": n, so every retry's body differs            |
//
// One process serves every variant. Test API (what a trigger calls):
//   POST /v/<variant>/messages  {"url": "...", "type": "test.ping", "data": {...}}
//        -> 202 {"id": "msg_..."}; delivery runs in the background
//   GET  /v/<variant>/dead-letters -> 200 [{"id", "url", "attempts", "last"}]
//   GET  /healthz -> 200
// Environment: WEBHOOK_SECRET (whsec_ secrets separated by spaces: every attempt is signed with
// each), WEBHOOK_RETRY_BASE and WEBHOOK_RETRY_CAP (seconds), WEBHOOK_JITTER ("full": uniform in
// [0, min(cap, base * 2^(n-1))]; "none": exactly that ceiling), WEBHOOK_MAX_ATTEMPTS,
// WEBHOOK_TIMEOUT (seconds, the whole request up to the response head), PORT (0: any free port).
// Prints "listening <port>" once it listens.
"use strict";

const crypto = require("node:crypto");
const http = require("node:http");
const https = require("node:https");

const BUGS = {
  "new-id-per-retry": "webhook-id is a fresh UUID per attempt",
  "stale-signature": "attempt 1's timestamp and signature reused on every retry",
  "reserialized-body": "signs JSON.stringify(payload), sends it pretty-printed",
  "raw-whsec-key": "HMAC key is the whole whsec_ string",
  "retry-any-4xx": "every non-2xx is retried, 4xx and 410 included",
  "delay-in-seconds": "seconds passed to setTimeout: no backoff",
  "backoff-not-awaited": "the backoff sleep is not awaited",
  "ignore-retry-after": "Retry-After is never read",
  "retry-after-int": "Retry-After parsed with parseInt only: HTTP dates ignored",
  "retry-after-429-only": "Retry-After read on 429 only, a 503's ignored",
  "no-timeout": "no request timeout",
  "timeout-not-aborted": "the timed-out request is left open",
  "follow-redirects": "3xx Location followed",
  "3xx-as-success": "status < 400 counts as delivered",
  "slow-body-failure": "the timeout covers the body: a slow 2xx body is a failure",
  "no-cap": "never gives up, never dead-letters",
  "parallel-copies": "two deliveries of one message at once",
  "reset-as-delivered": "a connection reset counts as delivered",
  "ms-timestamp": "timestamp in milliseconds",
  "attempt-in-body": "the body carries the attempt number",
};
const VARIANTS = new Set(["correct", ...Object.keys(BUGS)]);

const SECRETS = (process.env.WEBHOOK_SECRET || "").split(/\s+/).filter(Boolean);
const RETRY_BASE_S = Number(process.env.WEBHOOK_RETRY_BASE || 5);
const RETRY_CAP_S = Number(process.env.WEBHOOK_RETRY_CAP || 900);
const JITTER = process.env.WEBHOOK_JITTER || "full";
const MAX_ATTEMPTS = Number(process.env.WEBHOOK_MAX_ATTEMPTS || 8);
const TIMEOUT_S = Number(process.env.WEBHOOK_TIMEOUT || 10);
const RETRY_AFTER_MAX_S = 3600;
const MAX_REDIRECTS = 5;
const BODY_DRAIN_MS = 1000;
const USER_AGENT = "zoo-webhooks/1.0 (node)";

const deadLetters = new Map(); // variant -> [{id, url, attempts, last}]
const disabledEndpoints = new Set(); // "<variant> <url>" answered 410

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function signingKey(secret, bug) {
  if (bug === "raw-whsec-key") return Buffer.from(secret, "utf8");
  return Buffer.from(secret.startsWith("whsec_") ? secret.slice(6) : secret, "base64");
}

function sign(bug, id, timestamp, signedBody) {
  return SECRETS.map((secret) => {
    const mac = crypto.createHmac("sha256", signingKey(secret, bug));
    mac.update(`${id}.${timestamp}.${signedBody}`);
    return `v1,${mac.digest("base64")}`;
  }).join(" ");
}

function timestampNow(bug) {
  return bug === "ms-timestamp" ? Date.now() : Math.floor(Date.now() / 1000);
}

function buildRequest(bug, message, attempt) {
  const payload = { ...message.payload };
  if (bug === "attempt-in-body") payload.attempt = attempt;
  const signedBody = JSON.stringify(payload);
  const sentBody = bug === "reserialized-body" ? JSON.stringify(payload, null, 2) : signedBody;
  const id = bug === "new-id-per-retry" ? `msg_${crypto.randomUUID()}` : message.id;
  const timestamp = timestampNow(bug);
  return {
    body: Buffer.from(sentBody, "utf8"),
    headers: {
      "content-type": "application/json",
      "user-agent": USER_AGENT,
      "webhook-id": id,
      "webhook-timestamp": String(timestamp),
      "webhook-signature": sign(bug, id, timestamp, signedBody),
    },
  };
}

// One HTTP attempt. Resolves {kind: "status", status, headers} | {kind: "timeout"} |
// {kind: "connection", error}; never rejects.
function post(bug, url, request) {
  return new Promise((resolve) => {
    let settled = false;
    const settle = (outcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    const target = new URL(url);
    const transport = target.protocol === "https:" ? https : http;
    const req = transport.request(target, {
      method: "POST",
      headers: { ...request.headers, "content-length": request.body.length },
      agent: false,
    });
    const timer =
      bug === "no-timeout"
        ? null
        : setTimeout(() => {
            if (bug !== "timeout-not-aborted") req.destroy();
            settle({ kind: "timeout" });
          }, TIMEOUT_S * 1000);
    let bodyWritten = false;
    req.on("response", (res) => {
      const outcome = { kind: "status", status: res.statusCode, headers: res.headers };
      if (bug === "slow-body-failure") {
        // The bug: delivery counts only once the whole body was read within the timeout.
        res.on("data", () => {});
        res.on("end", () => settle(outcome));
        res.on("error", (error) => settle({ kind: "connection", error }));
        return;
      }
      // The status line decides; the body is drained for a moment and then dropped.
      settle(outcome);
      res.resume();
      setTimeout(() => res.destroy(), BODY_DRAIN_MS).unref();
    });
    req.on("error", (error) => {
      if (settled) return;
      if (bug === "reset-as-delivered" && bodyWritten && error.code === "ECONNRESET") {
        settle({ kind: "status", status: 200, headers: {}, assumed: true });
        return;
      }
      settle({ kind: "connection", error });
    });
    req.end(request.body, () => {
      bodyWritten = true;
    });
  });
}

async function postFollowingRedirects(bug, url, request) {
  let outcome = await post(bug, url, request);
  for (let hop = 0; hop < MAX_REDIRECTS; hop += 1) {
    const isRedirect = outcome.kind === "status" && outcome.status >= 300 && outcome.status < 400;
    if (!isRedirect || !outcome.headers.location) break;
    outcome = await post(bug, new URL(outcome.headers.location, url).toString(), request);
  }
  return outcome;
}

// "delivered" | "retry" | "stop" | "disable"
function classify(bug, outcome) {
  if (outcome.kind !== "status") return "retry";
  const status = outcome.status;
  if (status >= 200 && status < 300) return "delivered";
  if (bug === "3xx-as-success" && status < 400) return "delivered";
  if (bug === "retry-any-4xx") return "retry";
  if (status === 410) return "disable";
  if (status === 408 || status === 429 || status >= 500) return "retry";
  return "stop";
}

function retryAfterSeconds(bug, headers) {
  const value = headers["retry-after"];
  if (value === undefined || bug === "ignore-retry-after") return null;
  if (/^\s*\d+\s*$/.test(value)) return Math.min(Number(value), RETRY_AFTER_MAX_S);
  if (bug === "retry-after-int") {
    const seconds = parseInt(value, 10);
    return Number.isNaN(seconds) ? null : seconds;
  }
  const at = Date.parse(value);
  if (Number.isNaN(at)) return null;
  return Math.min(Math.max(0, (at - Date.now()) / 1000), RETRY_AFTER_MAX_S);
}

// Exponential backoff with jitter: the wait after attempt n (1-based).
function backoffSeconds(attempt) {
  const ceiling = Math.min(RETRY_CAP_S, RETRY_BASE_S * 2 ** (attempt - 1));
  return JITTER === "none" ? ceiling : Math.random() * ceiling;
}

async function deliver(variant, message) {
  const bug = variant === "correct" ? null : variant;
  const maxAttempts = bug === "no-cap" ? Infinity : MAX_ATTEMPTS;
  const send = bug === "follow-redirects" ? postFollowingRedirects : post;
  const prebuilt = bug === "stale-signature" ? buildRequest(bug, message, 1) : null;
  let last = null;
  for (let attempt = 1; attempt <= maxAttempts; attempt += 1) {
    const request = prebuilt || buildRequest(bug, message, attempt);
    const outcome = await send(bug, message.url, request);
    last = outcome.kind === "status" ? outcome.status : outcome.kind;
    const verdict = classify(bug, outcome);
    if (verdict === "delivered" || verdict === "stop") return;
    if (verdict === "disable") {
      disabledEndpoints.add(`${variant} ${message.url}`);
      return;
    }
    if (attempt === maxAttempts) break;
    const backoffS = backoffSeconds(attempt);
    const readsRetryAfter =
      outcome.kind === "status" && (bug !== "retry-after-429-only" || outcome.status === 429);
    const retryAfter = readsRetryAfter ? retryAfterSeconds(bug, outcome.headers) : null;
    const waitS = retryAfter === null ? backoffS : Math.max(backoffS, retryAfter);
    const waitMs = bug === "delay-in-seconds" ? waitS : waitS * 1000;
    if (bug === "backoff-not-awaited" && retryAfter === null) sleep(waitMs);
    else await sleep(waitMs);
  }
  const letters = deadLetters.get(variant) || [];
  letters.push({ id: message.id, url: message.url, attempts: maxAttempts, last });
  deadLetters.set(variant, letters);
}

function deliverInBackground(variant, message) {
  deliver(variant, message).catch((error) => {
    process.stderr.write(`delivery of ${message.id} crashed: ${error.stack}\n`);
  });
}

function answer(res, status, value) {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

function readJson(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}"));
      } catch (error) {
        reject(error);
      }
    });
    req.on("error", reject);
  });
}

async function handle(req, res) {
  const path = new URL(req.url, "http://localhost").pathname;
  if (req.method === "GET" && path === "/healthz") return answer(res, 200, { ok: true });
  const route = /^\/v\/([^/]+)\/(messages|dead-letters)$/.exec(path);
  if (!route || !VARIANTS.has(route[1])) return answer(res, 404, { error: "no such variant" });
  const [, variant, resource] = route;
  if (resource === "dead-letters" && req.method === "GET") {
    return answer(res, 200, deadLetters.get(variant) || []);
  }
  if (resource !== "messages" || req.method !== "POST") return answer(res, 405, { error: "method" });
  let input;
  try {
    input = await readJson(req);
  } catch {
    return answer(res, 400, { error: "body is not JSON" });
  }
  if (typeof input.url !== "string" || !/^https?:\/\//.test(input.url)) {
    return answer(res, 422, { error: "url must be an http(s) URL" });
  }
  if (disabledEndpoints.has(`${variant} ${input.url}`)) {
    return answer(res, 409, { error: "endpoint disabled after a 410" });
  }
  const id = `msg_${crypto.randomUUID().replace(/-/g, "")}`;
  const type = typeof input.type === "string" ? input.type : "test.ping";
  const message = {
    id,
    url: input.url,
    payload: { type, timestamp: new Date().toISOString(), data: input.data ?? { id } },
  };
  deliverInBackground(variant, message);
  if (variant === "parallel-copies") deliverInBackground(variant, message);
  return answer(res, 202, { id });
}

if (SECRETS.length === 0) {
  process.stderr.write("WEBHOOK_SECRET is required\n");
  process.exit(2);
}
const server = http.createServer((req, res) => {
  handle(req, res).catch((error) => answer(res, 500, { error: String(error) }));
});
server.listen(Number(process.env.PORT || 0), "127.0.0.1", () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
