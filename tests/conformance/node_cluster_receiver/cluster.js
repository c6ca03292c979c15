// A Standard Webhooks receiver run the way Node services are scaled on one machine: the
// `cluster` module forks WORKERS processes that share the port, and the primary hands each new
// connection to the next worker in turn. Node built-ins only (http, crypto, fs, cluster), for
// hookproof's conformance tests (tests/conformance/test_node_cluster_receivers.py).
//
// Two variants, each on a path of its own (POST /<variant>/webhooks, and the probe contract on
// GET /<variant>/_hookproof/events/:id with bearer PROBE_TOKEN):
//
// | correct       | the inbox is shared by every worker: one file per event id, claimed with    |
// |               | O_EXCL (a copy finding it in flight is answered 503 + Retry-After)          |
// | memory-dedupe | the inbox is a Map in each worker's memory (the effects are shared): a      |
// |               | duplicate handed to another worker is applied again                         |
//
// Effects and deliveries are appended to shared files before the answer, so the probe (served
// by whichever worker gets its connection) counts every worker's. Environment: SECRETS (comma-
// separated whsec_ secrets), PROBE_TOKEN, MAX_BODY (bytes), PORT, WORKERS (default 3), DATA_DIR
// (required). The primary prints "listening <port>" once every worker listens.
"use strict";

const cluster = require("node:cluster");
const crypto = require("node:crypto");
const fs = require("node:fs");
const http = require("node:http");
const path = require("node:path");

const SECRETS = (process.env.SECRETS || "").split(",").filter(Boolean);
const KEYS = SECRETS.map((secret) => Buffer.from(secret.replace(/^whsec_/, ""), "base64"));
const PROBE_TOKEN = process.env.PROBE_TOKEN || "";
const MAX_BODY = Number(process.env.MAX_BODY || 1048576);
const WORKERS = Number(process.env.WORKERS || 3);
const DATA_DIR = process.env.DATA_DIR;
const TOLERANCE_S = 300;
const VARIANTS = ["correct", "memory-dedupe"];

function answer(res, status, document, headers = {}) {
  const body = Buffer.from(JSON.stringify(document));
  const type = status >= 400 ? "application/problem+json" : "application/json";
  res.writeHead(status, { "content-type": type, "content-length": body.length, ...headers });
  res.end(body);
}

function problem(res, status, slug, headers = {}) {
  answer(res, status, { type: `https://example.test/problems/${slug}`, title: slug, status }, headers);
}

// Standard Webhooks, verified over the raw bytes with every secret and every v1 entry.
function refusal(headers, raw) {
  const id = headers["webhook-id"];
  const ts = headers["webhook-timestamp"];
  const header = headers["webhook-signature"];
  if (!id || !ts || !header) return [400, "missing-header"];
  if (!/^[0-9]{1,12}$/.test(ts)) return [400, "malformed-header"];
  const age = Math.floor(Date.now() / 1000) - Number(ts);
  if (Math.abs(age) > TOLERANCE_S) return [401, "timestamp-outside-tolerance"];
  const signed = Buffer.concat([Buffer.from(`${id}.${ts}.`), raw]);
  for (const key of KEYS) {
    const expected = crypto.createHmac("sha256", key).update(signed).digest();
    for (const entry of header.split(" ")) {
      const [version, sig] = entry.split(",");
      if (version !== "v1" || !sig || !/^[A-Za-z0-9+/]+={0,2}$/.test(sig)) continue;
      const given = Buffer.from(sig, "base64");
      if (given.length === expected.length && crypto.timingSafeEqual(given, expected)) return null;
    }
  }
  return [401, "signature-mismatch"];
}

function file(variant, kind, eventId) {
  const name = crypto.createHash("sha256").update(eventId).digest("hex");
  return path.join(DATA_DIR, variant, kind, name);
}

function lines(where) {
  try {
    return fs.readFileSync(where, "utf8").split("\n").filter(Boolean).length;
  } catch (error) {
    if (error.code === "ENOENT") return 0;
    throw error;
  }
}

const tick = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const memoryInbox = new Map(); // memory-dedupe: this worker's alone

// Claims the event id: "new", "committed" or "in_flight".
function claim(variant, eventId) {
  if (variant === "memory-dedupe") {
    const state = memoryInbox.get(eventId);
    if (state) return state;
    memoryInbox.set(eventId, "in_flight");
    return "new";
  }
  try {
    fs.closeSync(fs.openSync(file(variant, "inbox", eventId), "wx"));
    return "new";
  } catch (error) {
    if (error.code !== "EEXIST") throw error;
    return fs.readFileSync(file(variant, "inbox", eventId), "utf8") === "committed"
      ? "committed"
      : "in_flight";
  }
}

function commit(variant, eventId) {
  fs.appendFileSync(file(variant, "effects", eventId), "applied\n");
  if (variant === "memory-dedupe") memoryInbox.set(eventId, "committed");
  else fs.writeFileSync(file(variant, "inbox", eventId), "committed");
}

async function deliver(variant, req, res, raw) {
  const wrong = refusal(req.headers, raw);
  if (wrong) return problem(res, wrong[0], wrong[1]);
  let document;
  try {
    document = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(raw));
  } catch (error) {
    return problem(res, 400, "invalid-payload");
  }
  if (document === null || typeof document !== "object" || Array.isArray(document)) {
    return problem(res, 400, "invalid-payload");
  }
  const eventId = req.headers["webhook-id"];
  fs.appendFileSync(file(variant, "deliveries", eventId), "copy\n");
  const state = claim(variant, eventId);
  if (state === "committed") return answer(res, 200, { status: "already applied" });
  if (state === "in_flight") return problem(res, 503, "in-flight", { "retry-after": "1" });
  await tick(5); // the handler's work
  commit(variant, eventId);
  return answer(res, 200, { status: "applied" });
}

function probe(variant, req, res, eventId) {
  if (req.headers.authorization !== `Bearer ${PROBE_TOKEN}`) return problem(res, 401, "probe-token");
  const effects = lines(file(variant, "effects", eventId));
  const deliveries = lines(file(variant, "deliveries", eventId));
  let status = effects ? "committed" : null;
  if (variant === "correct" && fs.existsSync(file(variant, "inbox", eventId))) {
    status = fs.readFileSync(file(variant, "inbox", eventId), "utf8") === "committed"
      ? "committed"
      : "in_flight";
  }
  if (!status && !deliveries) return problem(res, 404, "not-found");
  return answer(res, 200, { event_id: eventId, status: status || "in_flight", effects, deliveries });
}

function serve(req, res) {
  const match = /^\/([a-z-]+)\/(webhooks|_hookproof\/events\/(.+))$/.exec(req.url.split("?")[0]);
  if (!match || !VARIANTS.includes(match[1])) return problem(res, 404, "not-found");
  const variant = match[1];
  if (match[3] !== undefined) return probe(variant, req, res, decodeURIComponent(match[3]));
  if (req.method !== "POST") return problem(res, 405, "method-not-allowed");
  const chunks = [];
  let size = 0;
  req.on("data", (chunk) => {
    size += chunk.length;
    if (size <= MAX_BODY) chunks.push(chunk);
  });
  req.on("end", () => {
    if (size > MAX_BODY) return problem(res, 413, "body-too-large");
    deliver(variant, req, res, Buffer.concat(chunks)).catch((error) => {
      process.stderr.write(`[cluster] ${error.stack}\n`);
      problem(res, 503, "unavailable", { "retry-after": "1" });
    });
  });
}

if (cluster.isPrimary) {
  for (const variant of VARIANTS) {
    for (const kind of ["inbox", "effects", "deliveries"]) {
      fs.mkdirSync(path.join(DATA_DIR, variant, kind), { recursive: true });
    }
  }
  cluster.schedulingPolicy = cluster.SCHED_RR; // the primary deals connections in turn
  let ready = 0;
  cluster.on("listening", (worker, address) => {
    ready += 1;
    if (ready === WORKERS) process.stdout.write(`listening ${address.port}\n`);
  });
  cluster.on("exit", () => process.exit(1)); // a worker died: the test sees the server gone
  for (let i = 0; i < WORKERS; i += 1) cluster.fork();
} else {
  http.createServer(serve).listen(Number(process.env.PORT || 0), "127.0.0.1");
}
