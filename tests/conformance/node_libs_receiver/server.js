'use strict';
/*
 * Express webhook receivers built on the official npm verification libraries, the way Node teams
 * deploy them: `stripe` (stripe.webhooks.constructEvent over express.raw), `svix`
 * (new Webhook(secret).verify(payload, headers), Standard Webhooks headers) and GitHub's
 * `@octokit/webhooks` (createNodeMiddleware, or verify + receive). ONE process serves
 * every variant below at /<variant>/webhooks, each with its own store and its own probe at
 * GET /<variant>/_hookproof/events/<event_id> (the contract of docs/receiver.md, "The probe").
 *
 * Config (env): STRIPE_SECRET, SVIX_SECRETS and GITHUB_SECRETS (comma-separated; the first is the one a
 * single-secret sample uses), PROBE_TOKEN (probe off when empty), PORT (0 = any free port; prints
 * `listening <port>` once listening), MAX_BODY (the careful variants' body limit, 1 MiB; the others
 * keep express.raw's default of 100kb), COMMIT_DELAY_MS (the store's simulated commit time, 25).
 *
 * Every store is an in-memory Map whose commit is a promise that resolves after COMMIT_DELAY_MS
 * (standing in for a database transaction that writes the dedupe row and the effect together).
 *
 * | variant                       | what it is (broken variants: the ONE bug they carry)                                               |
 * |-------------------------------|----------------------------------------------------------------------------------------------------|
 * | stripe-docs                   | Stripe's documented Express sample (express.raw, constructEvent, 400 on any throw) + dedupe/probe  |
 * | stripe-correct                | careful team: every library error mapped to a problem+json 4xx, rotation, 1 MiB limit, any type    |
 * | svix-docs                     | Svix's documented Express sample verbatim: its catch answers 400 but has no `return`               |
 * | svix-docs-return              | the same sample with the `return` a reader adds in the catch                                       |
 * | svix-correct                  | careful team: every library error mapped to a problem+json 4xx, rotation, 1 MiB limit, any type    |
 * | stripe-json-reserialized      | app.use(express.json()) before the route, so it verifies JSON.stringify(req.body), not the bytes   |
 * | stripe-catch-500              | the catch around constructEvent answers 500 to every library error                                 |
 * | stripe-tolerance-zero         | constructEvent(..., tolerance 0): stripe-node reads 0 as "skip the timestamp check"                |
 * | stripe-tolerance-ms           | constructEvent(..., 5 * 60 * 1000): the tolerance given in milliseconds (an 83-hour window)        |
 * | stripe-dedupe-before-verify   | the event id from the unverified body is stored as processed before constructEvent runs            |
 * | stripe-dedupe-signature       | dedupe keyed on the Stripe-Signature header instead of event.id                                    |
 * | stripe-ack-before-commit      | res.sendStatus(200) before `await store.commit()`                                                  |
 * | stripe-first-secret-only      | only the first of the configured whsec_ secrets is tried (rotation breaks)                         |
 * | stripe-trust-loopback         | trust proxy on, and verification skipped when req.ip (X-Forwarded-For) is loopback ("internal")    |
 * | stripe-html-500               | an app error handler turns every error (express.raw's 413 included) into an HTML 500 page          |
 * | stripe-no-limit               | express.raw({limit: Infinity}): no body limit at all (express.raw's default is 100kb -> 413)       |
 * | svix-first-secret-only        | only the first of the configured whsec_ secrets is tried (rotation breaks)                         |
 * | svix-raw-secret               | the whsec_ prefix stripped by hand and the rest used as raw key bytes ({format: 'raw'})            |
 * | svix-rawheaders-case          | the dedupe id read from req.rawHeaders case-sensitively ('webhook-id' only)                        |
 * | svix-latin1-body              | the body read as req.body.toString() then re-encoded with Buffer.from(str, 'latin1')               |
 * | svix-rethrow-non-verification | only WebhookVerificationError is answered 400; anything else the library throws becomes a 500      |
 * | svix-check-then-act           | no in-flight state: "seen?" is checked, then the commit awaited, so concurrent copies both apply   |
 * | svix-inflight-200             | a copy arriving while the first is still being committed is answered 200 "duplicate"               |
 * | svix-async-after-200          | the dedupe row is committed, 200 sent, and the effect runs later in a setTimeout                   |
 * | svix-no-dedupe                | the effect is applied on every verified delivery (the dedupe row is written but never read)        |
 * | github-docs                   | Octokit's documented createNodeMiddleware + webhooks.onAny, one secret, + the team's dedupe/probe  |
 * | github-correct                | careful team: webhooks.verify with every secret, problem+json 4xx, a checked delivery id, 1 MiB    |
 * | github-verify-ignores-extra   | Webhooks({secret, additionalSecrets}) + webhooks.verify(): verify tries the first secret only      |
 * | github-verify-reserialized    | express.json() first, then verifyAndReceive over JSON.stringify(req.body), not the bytes           |
 * | github-dedupe-before-verify   | the X-GitHub-Delivery id is stored as processed before webhooks.verify runs                        |
 * | github-short-timeout          | createNodeMiddleware(..., {timeout: 5}): Octokit answers 202 "still processing" before the commit  |
 * | github-algorithm-from-header  | the older recipe: createHmac(header.split('=')[0], secret), unguarded: crc32b=... is a 500          |
 * | github-no-dedupe              | the effect is applied on every verified delivery: onAny never looks the delivery id up             |
 */

const crypto = require('node:crypto');
const express = require('express');
const Stripe = require('stripe');
const { Webhook, WebhookVerificationError } = require('svix');

const STRIPE_SECRETS = splitList(process.env.STRIPE_SECRET);
const SVIX_SECRETS = splitList(process.env.SVIX_SECRETS);
const GITHUB_SECRETS = splitList(process.env.GITHUB_SECRETS);
let octokit = null; // @octokit/webhooks is an ES module: imported at start-up, below
const PROBE_TOKEN = process.env.PROBE_TOKEN || '';
const PORT = Number(process.env.PORT || 0);
const COMMIT_DELAY_MS = Number(process.env.COMMIT_DELAY_MS || 25);
const CAREFUL_MAX_BODY = Number(process.env.MAX_BODY || 1024 * 1024);

// The Stripe client: only its webhooks helper is used, so the API key is never sent anywhere.
const stripe = Stripe('sk_test_hookproof_unused');

function splitList(text) {
  return (text || '')
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/*
 * One variant's store: dedupe rows keyed by the variant's dedupe key, each remembering which event
 * it belongs to. `effects` counts applied effects; the probe sums a variant's rows per event id.
 */
class Store {
  constructor() {
    this.rows = new Map();
  }

  row(key, eventId) {
    let row = this.rows.get(key);
    if (!row) {
      row = { eventId, state: 'new', effects: 0, deliveries: 0 };
      this.rows.set(key, row);
    }
    return row;
  }

  /** 'claimed' (yours now), 'duplicate' (committed earlier) or 'busy' (another copy holds it). */
  claim(key, eventId) {
    const row = this.row(key, eventId);
    row.deliveries += 1;
    if (row.state === 'committed') return 'duplicate';
    if (row.state === 'in_flight') return 'busy';
    row.state = 'in_flight';
    return 'claimed';
  }

  isCommitted(key) {
    const row = this.rows.get(key);
    return Boolean(row && row.state === 'committed');
  }

  /** The dedupe row (and, unless effect is false, the event's effect) in one "transaction". */
  async commit(key, eventId, { effect = true } = {}) {
    await sleep(COMMIT_DELAY_MS);
    const row = this.row(key, eventId);
    row.state = 'committed';
    if (effect) row.effects += 1;
  }

  applyEffect(key, eventId) {
    this.row(key, eventId).effects += 1;
  }

  release(key) {
    const row = this.rows.get(key);
    if (row && row.state === 'in_flight') row.state = 'released';
  }

  /** The probe document of one event, or null when no row belongs to it. */
  probe(eventId) {
    let found = false;
    let committed = false;
    let effects = 0;
    let deliveries = 0;
    for (const row of this.rows.values()) {
      if (row.eventId !== eventId) continue;
      found = true;
      committed = committed || row.state === 'committed';
      effects += row.effects;
      deliveries += row.deliveries;
    }
    if (!found) return null;
    return {
      event_id: eventId,
      status: committed ? 'committed' : 'in_flight',
      effects,
      deliveries,
    };
  }
}

function problem(res, status, slug, title, detail, headers = {}) {
  res.set(headers);
  res.status(status).type('application/problem+json');
  res.send(
    JSON.stringify({
      type: `https://errors.example.com/webhooks/${slug}`,
      title,
      status,
      detail,
    }),
  );
}

function tokenMatches(header) {
  const expected = Buffer.from(`Bearer ${PROBE_TOKEN}`);
  const given = Buffer.from(header || '');
  return given.length === expected.length && crypto.timingSafeEqual(given, expected);
}

function mountProbe(sub, store) {
  sub.get('/_hookproof/events/:eventId', (req, res) => {
    if (!PROBE_TOKEN) return problem(res, 404, 'not-found', 'Not found', 'the probe is off');
    if (!tokenMatches(req.get('authorization'))) {
      return problem(res, 401, 'unauthorized', 'Unauthorized', 'missing or wrong probe token');
    }
    const document = store.probe(req.params.eventId);
    if (!document) return problem(res, 404, 'unknown-event', 'Unknown event', 'no such event');
    return res.json(document);
  });
}

/*
 * The dedupe the docs samples get where they say "handle the event": claim the id, commit the row
 * and the effect, then acknowledge. A copy in flight gets 503 + Retry-After.
 */
async function handleOnce(store, eventId, res, acknowledge) {
  const outcome = store.claim(eventId, eventId);
  if (outcome === 'duplicate') return acknowledge({ duplicate: true });
  if (outcome === 'busy') {
    res.set('Retry-After', '1');
    return res.status(503).json({ error: 'event is being processed, retry later' });
  }
  try {
    await store.commit(eventId, eventId);
  } catch (err) {
    store.release(eventId);
    res.set('Retry-After', '1');
    return res.status(503).json({ error: 'could not record the event' });
  }
  return acknowledge({});
}

// ---------------------------------------------------------------------------------------------
// Stripe

function stripeDocs(sub, store, options = {}) {
  const endpointSecret = STRIPE_SECRETS[0];
  const tolerance = options.tolerance; // undefined: the library's default (300 s)
  const rawLimit = options.limit === undefined ? {} : { limit: options.limit };
  const failureStatus = options.failureStatus || 400;
  // Stripe's documented sample, route-level express.raw with type application/json.
  sub.post(
    '/webhooks',
    express.raw({ type: 'application/json', ...rawLimit }),
    async (request, response) => {
      const sig = request.headers['stripe-signature'];

      let event;

      try {
        event = stripe.webhooks.constructEvent(request.body, sig, endpointSecret, tolerance);
      } catch (err) {
        response.status(failureStatus).send(`Webhook Error: ${err.message}`);
        return;
      }

      // Handle the event (here: the team's dedupe + effect), then acknowledge receipt.
      await handleOnce(store, event.id, response, () => response.json({ received: true }));
    },
  );
}

/** Which answer a stripe-node error deserves, and whether another secret could still match. */
function classifyStripeError(err) {
  if (err instanceof SyntaxError) {
    return { status: 400, slug: 'invalid-payload', title: 'Body is not JSON', final: true };
  }
  if (err instanceof Stripe.errors.StripeSignatureVerificationError) {
    const message = err.message || '';
    if (message.startsWith('No signatures found matching')) {
      return { status: 401, slug: 'signature-mismatch', title: 'Bad signature', final: false };
    }
    if (message.startsWith('Timestamp outside the tolerance zone')) {
      return { status: 401, slug: 'timestamp-outside-tolerance', title: 'Stale', final: true };
    }
    if (message.startsWith('No webhook payload')) {
      return { status: 400, slug: 'invalid-payload', title: 'Empty body', final: true };
    }
    if (message.startsWith('No stripe-signature header')) {
      return { status: 400, slug: 'missing-header', title: 'Missing header', final: true };
    }
    return { status: 400, slug: 'malformed-header', title: 'Malformed header', final: true };
  }
  // Anything else the library throws (secureCompare on an empty v1=, timingSafeEqual's RangeError
  // on a non-ASCII signature, a thin v2 event): the request is bad, retrying cannot help.
  return { status: 400, slug: 'malformed-header', title: 'Unverifiable delivery', final: true };
}

function stripeCorrect(sub, store) {
  sub.post(
    '/webhooks',
    express.raw({ type: () => true, limit: CAREFUL_MAX_BODY }),
    async (req, res) => {
      const header = req.get('stripe-signature');
      if (!header) {
        return problem(res, 400, 'missing-header', 'Missing header', 'no Stripe-Signature header');
      }
      const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      let event = null;
      let refusal = null;
      for (const secret of STRIPE_SECRETS) {
        try {
          event = stripe.webhooks.constructEvent(body, header, secret);
          refusal = null;
          break;
        } catch (err) {
          refusal = classifyStripeError(err);
          if (refusal.final) break;
        }
      }
      if (!event) {
        const r = refusal || classifyStripeError(new Error('no secret configured'));
        return problem(res, r.status, r.slug, r.title, 'the delivery was not accepted');
      }
      if (typeof event !== 'object' || Array.isArray(event) || typeof event.id !== 'string' || !event.id) {
        return problem(res, 400, 'invalid-payload', 'No event id', "the body needs a string 'id'");
      }
      const outcome = store.claim(event.id, event.id);
      if (outcome === 'duplicate') return res.json({ received: true, duplicate: true });
      if (outcome === 'busy') {
        return problem(res, 503, 'in-flight', 'In flight', 'a copy is being processed', {
          'Retry-After': '1',
        });
      }
      try {
        await store.commit(event.id, event.id);
      } catch (err) {
        store.release(event.id);
        return problem(res, 503, 'store-unavailable', 'Unavailable', 'not recorded', {
          'Retry-After': '1',
        });
      }
      return res.json({ received: true });
    },
  );
  sub.use(carefulErrorHandler);
}

/** express.raw's own errors (413, aborted bodies, bad encodings) as problem+json. */
function carefulErrorHandler(err, req, res, next) {
  if (res.headersSent) return next(err);
  const status = Number(err.status || err.statusCode) || 500;
  if (status >= 400 && status < 500) {
    return problem(res, status, err.type || 'bad-request', 'Refused', err.expose ? err.message : 'refused');
  }
  return problem(res, 503, 'unavailable', 'Unavailable', 'try again later', { 'Retry-After': '1' });
}

function stripeJsonReserialized(sub, store) {
  // BUG: a global JSON parser runs first, so the route sees an object and verifies its re-serialization.
  sub.use(express.json());
  sub.post('/webhooks', express.raw({ type: 'application/json' }), async (request, response) => {
    const sig = request.headers['stripe-signature'];
    let event;
    try {
      event = stripe.webhooks.constructEvent(JSON.stringify(request.body), sig, STRIPE_SECRETS[0]);
    } catch (err) {
      response.status(400).send(`Webhook Error: ${err.message}`);
      return;
    }
    await handleOnce(store, event.id, response, () => response.json({ received: true }));
  });
}

function stripeDedupeBeforeVerify(sub, store) {
  sub.post('/webhooks', express.raw({ type: 'application/json' }), async (request, response) => {
    let eventId;
    try {
      eventId = JSON.parse(request.body.toString()).id;
    } catch (err) {
      return response.status(400).send('Webhook Error: invalid JSON');
    }
    if (store.isCommitted(eventId)) return response.json({ received: true, duplicate: true });
    // BUG: the id from the unverified body is recorded as processed before it is verified.
    await store.commit(eventId, eventId, { effect: false });
    let event;
    try {
      event = stripe.webhooks.constructEvent(request.body, request.headers['stripe-signature'], STRIPE_SECRETS[0]);
    } catch (err) {
      response.status(400).send(`Webhook Error: ${err.message}`);
      return;
    }
    store.applyEffect(event.id, event.id);
    response.json({ received: true });
  });
}

function stripeDedupeSignature(sub, store) {
  sub.post('/webhooks', express.raw({ type: 'application/json' }), async (request, response) => {
    const sig = request.headers['stripe-signature'];
    let event;
    try {
      event = stripe.webhooks.constructEvent(request.body, sig, STRIPE_SECRETS[0]);
    } catch (err) {
      response.status(400).send(`Webhook Error: ${err.message}`);
      return;
    }
    // BUG: the dedupe key is the signature header, which changes with every (re-signed) attempt.
    const outcome = store.claim(sig, event.id);
    if (outcome === 'duplicate') return response.json({ received: true, duplicate: true });
    if (outcome === 'busy') return response.set('Retry-After', '1').status(503).json({ error: 'busy' });
    await store.commit(sig, event.id);
    response.json({ received: true });
  });
}

function stripeAckBeforeCommit(sub, store) {
  sub.post('/webhooks', express.raw({ type: 'application/json' }), async (request, response) => {
    let event;
    try {
      event = stripe.webhooks.constructEvent(request.body, request.headers['stripe-signature'], STRIPE_SECRETS[0]);
    } catch (err) {
      response.status(400).send(`Webhook Error: ${err.message}`);
      return;
    }
    const outcome = store.claim(event.id, event.id);
    if (outcome === 'duplicate') return response.json({ received: true, duplicate: true });
    if (outcome === 'busy') return response.set('Retry-After', '1').status(503).json({ error: 'busy' });
    // BUG: the 200 leaves before the row and the effect are committed.
    response.sendStatus(200);
    await store.commit(event.id, event.id);
  });
}

function stripeFirstSecretOnly(sub, store) {
  // BUG: STRIPE_SECRET holds the rotation list, but only its first entry is ever tried.
  stripeDocs(sub, store);
}

function stripeTrustLoopback(sub, store) {
  sub.set('trust proxy', true);
  sub.post('/webhooks', express.raw({ type: 'application/json' }), async (request, response) => {
    let event;
    // BUG: "internal replays skip verification", with req.ip taken from X-Forwarded-For (or the proxy).
    if (['127.0.0.1', '::1', '::ffff:127.0.0.1'].includes(request.ip)) {
      try {
        event = JSON.parse(request.body.toString());
      } catch (err) {
        return response.status(400).send('Webhook Error: invalid JSON');
      }
    } else {
      try {
        event = stripe.webhooks.constructEvent(request.body, request.headers['stripe-signature'], STRIPE_SECRETS[0]);
      } catch (err) {
        response.status(400).send(`Webhook Error: ${err.message}`);
        return;
      }
    }
    await handleOnce(store, event.id, response, () => response.json({ received: true }));
  });
}

function stripeHtml500(sub, store) {
  stripeDocs(sub, store);
  // BUG: the app's catch-all error page, for body-parser's 413/400/415 too.
  sub.use((err, req, res, next) => {
    res.status(500).type('html').send('<!DOCTYPE html><h1>Something went wrong</h1>');
  });
}

// ---------------------------------------------------------------------------------------------
// Svix

/** The event id the svix library verified: svix-id wins over webhook-id, as in svix's verify(). */
function svixEventId(headers) {
  return headers['svix-id'] ?? headers['webhook-id'];
}

function svixDocs(sub, store, { withReturn }) {
  const secret = SVIX_SECRETS[0];
  // Svix's documented Express sample (bodyParser.raw is express.raw: the same body-parser module).
  sub.post('/webhooks', express.raw({ type: 'application/json' }), async (req, res) => {
    const payload = req.body;
    const headers = req.headers;

    const wh = new Webhook(secret);
    let msg;
    try {
      msg = wh.verify(payload, headers);
    } catch (err) {
      if (withReturn) return res.status(400).json({});
      res.status(400).json({}); // verbatim: the documented catch has no `return`
    }

    // Do something with the message... (here: the team's dedupe + effect)
    await handleOnce(store, svixEventId(headers), res, () => res.json({}));
  });
}

/** Which answer a svix error deserves, and whether another secret could still match. */
function classifySvixError(err) {
  if (err instanceof WebhookVerificationError) {
    const message = err.message || '';
    if (message === 'No matching signature found') {
      return { status: 401, slug: 'signature-mismatch', title: 'Bad signature', final: false };
    }
    if (message.startsWith('Message timestamp')) {
      return { status: 401, slug: 'timestamp-outside-tolerance', title: 'Stale or early', final: true };
    }
    if (message === 'Missing required headers') {
      return { status: 400, slug: 'missing-header', title: 'Missing header', final: true };
    }
    return { status: 400, slug: 'malformed-header', title: 'Malformed header', final: true };
  }
  if (err instanceof SyntaxError) {
    // JSON.parse after a matching signature: a signed body that is not JSON.
    return { status: 400, slug: 'invalid-payload', title: 'Body is not JSON', final: true };
  }
  return { status: 400, slug: 'invalid-payload', title: 'Unverifiable delivery', final: true };
}

function svixCorrect(sub, store) {
  const verifiers = SVIX_SECRETS.map((secret) => new Webhook(secret));
  sub.post(
    '/webhooks',
    express.raw({ type: () => true, limit: CAREFUL_MAX_BODY }),
    async (req, res) => {
      const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      let msg = null;
      let refusal = null;
      for (const wh of verifiers) {
        try {
          msg = wh.verify(body, req.headers);
          refusal = null;
          break;
        } catch (err) {
          refusal = classifySvixError(err);
          if (refusal.final) break;
        }
      }
      if (msg === null) {
        const r = refusal || classifySvixError(new Error('no secret configured'));
        return problem(res, r.status, r.slug, r.title, 'the delivery was not accepted');
      }
      const eventId = svixEventId(req.headers);
      const outcome = store.claim(eventId, eventId);
      if (outcome === 'duplicate') return res.json({ duplicate: true });
      if (outcome === 'busy') {
        return problem(res, 503, 'in-flight', 'In flight', 'a copy is being processed', {
          'Retry-After': '1',
        });
      }
      try {
        await store.commit(eventId, eventId);
      } catch (err) {
        store.release(eventId);
        return problem(res, 503, 'store-unavailable', 'Unavailable', 'not recorded', {
          'Retry-After': '1',
        });
      }
      return res.json({});
    },
  );
  sub.use(carefulErrorHandler);
}

/** The svix sample with its `return`, verifying with `verifier(req)`; `id(req)` picks the dedupe key. */
function svixSample(sub, store, { verify, id = (req) => svixEventId(req.headers), claim } = {}) {
  const wh = new Webhook(SVIX_SECRETS[0]);
  const check = verify || ((req) => wh.verify(req.body, req.headers));
  sub.post('/webhooks', express.raw({ type: 'application/json' }), async (req, res) => {
    try {
      check(req);
    } catch (err) {
      return res.status(400).json({});
    }
    if (claim) return claim(req, res, id(req), svixEventId(req.headers));
    return handleOnce(store, id(req), res, () => res.json({}));
  });
}

function svixRawheadersCase(sub, store) {
  svixSample(sub, store, {
    // BUG: rawHeaders keep the sender's spelling; only the lower-case names are looked up.
    id: (req) => {
      const named = {};
      for (let i = 0; i < req.rawHeaders.length; i += 2) named[req.rawHeaders[i]] = req.rawHeaders[i + 1];
      return named['svix-id'] || named['webhook-id'];
    },
    claim: (req, res, key, eventId) => {
      const outcome = store.claim(key, eventId);
      if (outcome === 'duplicate') return res.json({ duplicate: true });
      if (outcome === 'busy') return res.set('Retry-After', '1').status(503).json({ error: 'busy' });
      return store.commit(key, eventId).then(() => res.json({}));
    },
  });
}

function svixLatin1Body(sub, store) {
  const wh = new Webhook(SVIX_SECRETS[0]);
  // BUG: the bytes go through a JS string and back as latin1, so non-ASCII text changes.
  svixSample(sub, store, { verify: (req) => wh.verify(Buffer.from(req.body.toString(), 'latin1'), req.headers) });
}

function svixRethrowNonVerification(sub, store) {
  const wh = new Webhook(SVIX_SECRETS[0]);
  sub.post('/webhooks', express.raw({ type: 'application/json' }), async (req, res) => {
    try {
      wh.verify(req.body, req.headers);
    } catch (err) {
      if (err instanceof WebhookVerificationError) return res.status(400).json({});
      throw err; // BUG: JSON.parse's SyntaxError, a missing body's TypeError... become Express's 500
    }
    await handleOnce(store, svixEventId(req.headers), res, () => res.json({}));
  });
}

function svixCheckThenAct(sub, store) {
  svixSample(sub, store, {
    claim: async (req, res, key, eventId) => {
      // BUG: no in-flight state: two copies both pass the check before either commit lands.
      if (store.isCommitted(key)) return res.json({ duplicate: true });
      store.row(key, eventId).deliveries += 1;
      await store.commit(key, eventId);
      return res.json({});
    },
  });
}

function svixInflight200(sub, store) {
  svixSample(sub, store, {
    claim: async (req, res, key, eventId) => {
      const outcome = store.claim(key, eventId);
      // BUG: a copy in flight is answered 200 as if the first copy had already been committed.
      if (outcome !== 'claimed') return res.json({ duplicate: true });
      await store.commit(key, eventId);
      return res.json({});
    },
  });
}

function svixAsyncAfter200(sub, store) {
  svixSample(sub, store, {
    claim: async (req, res, key, eventId) => {
      const outcome = store.claim(key, eventId);
      if (outcome === 'duplicate') return res.json({ duplicate: true });
      if (outcome === 'busy') return res.set('Retry-After', '1').status(503).json({ error: 'busy' });
      await store.commit(key, eventId, { effect: false });
      res.json({});
      // BUG: the effect runs after the 200, outside the commit; a crash here loses it.
      setTimeout(() => store.applyEffect(key, eventId), 200);
      return undefined;
    },
  });
}

function svixNoDedupe(sub, store) {
  svixSample(sub, store, {
    claim: async (req, res, key, eventId) => {
      store.row(key, eventId).deliveries += 1;
      // BUG: the row is written but never read: every verified copy applies the effect again.
      await store.commit(key, eventId);
      return res.json({});
    },
  });
}

// ---------------------------------------------------------------------------------------------
// GitHub (@octokit/webhooks)

/** An error Octokit's middleware answers with `status` (it reads err.status). */
function statusError(status, message) {
  return Object.assign(new Error(message), { status });
}

/** The team's dedupe inside an Octokit handler: a copy in flight is a 503 (thrown). */
async function githubOnce(store, id) {
  const outcome = store.claim(id, id);
  if (outcome === 'duplicate') return;
  if (outcome === 'busy') throw statusError(503, 'event is being processed, retry later');
  await store.commit(id, id);
}

function githubMiddleware(sub, webhooks, options = {}) {
  // Octokit's documented Node middleware, mounted under the variant's path.
  sub.use(octokit.createNodeMiddleware(webhooks, { path: '/webhooks', ...options }));
}

function githubDocs(sub, store, options = {}) {
  const webhooks = new octokit.Webhooks({ secret: GITHUB_SECRETS[0] });
  webhooks.onAny(async ({ id }) => githubOnce(store, id));
  githubMiddleware(sub, webhooks, options);
}

const DELIVERY_ID = /^[0-9A-Za-z._:-]{1,255}$/;

/** The careful team's verify: every configured secret in turn (webhooks.verify takes one). */
function everySecret() {
  const verifiers = GITHUB_SECRETS.map((secret) => new octokit.Webhooks({ secret }));
  return async (body, signature) => {
    for (const verifier of verifiers) {
      if (await verifier.verify(body, signature)) return true;
    }
    return false;
  };
}

function githubCareful(sub, store, verify, { guarded = true } = {}) {
  const webhooks = new octokit.Webhooks({ secret: GITHUB_SECRETS[0] });
  sub.post(
    '/webhooks',
    express.raw({ type: () => true, limit: CAREFUL_MAX_BODY }),
    async (req, res) => {
      const id = req.get('x-github-delivery');
      const signature = req.get('x-hub-signature-256');
      const name = req.get('x-github-event');
      if (!id || !signature || !name) {
        return problem(res, 400, 'missing-header', 'Missing header', 'a GitHub header is missing');
      }
      if (!DELIVERY_ID.test(id)) {
        return problem(res, 400, 'malformed-header', 'Bad delivery id', 'X-GitHub-Delivery');
      }
      const body = Buffer.isBuffer(req.body) ? req.body.toString('utf8') : '';
      let verified = false;
      try {
        verified = await verify(body, signature);
      } catch (err) {
        if (!guarded) throw err; // Express 5 answers a rejected handler 500
        verified = false; // a malformed signature header: refused like a wrong one
      }
      if (!verified) {
        return problem(res, 401, 'signature-mismatch', 'Bad signature', 'the delivery was refused');
      }
      let payload;
      try {
        payload = JSON.parse(body);
      } catch (err) {
        return problem(res, 400, 'invalid-payload', 'Body is not JSON', 'the body is not JSON');
      }
      const outcome = store.claim(id, id);
      if (outcome === 'duplicate') return res.json({ duplicate: true });
      if (outcome === 'busy') {
        res.set('Retry-After', '1');
        return problem(res, 503, 'in-flight', 'In flight', 'retry later');
      }
      try {
        await webhooks.receive({ id, name, payload });
        await store.commit(id, id);
      } catch (err) {
        store.release(id);
        res.set('Retry-After', '1');
        return problem(res, 503, 'handler-failed', 'Handler failed', 'retry later');
      }
      return res.json({});
    },
  );
}

function githubCorrect(sub, store) {
  githubCareful(sub, store, everySecret());
}

function githubAlgorithmFromHeader(sub, store) {
  // BUG: an older recipe takes the algorithm from the header ('sha256=<hex>' split at '='), so
  // crypto.createHmac throws on a digest it does not know (crc32b=...), outside any try: a 500.
  const verify = (body, signature) => {
    const [algorithm, given = ''] = signature.split('=');
    return GITHUB_SECRETS.some((secret) => {
      const expected = crypto.createHmac(algorithm, secret).update(body).digest('hex');
      return given.length === expected.length
        && crypto.timingSafeEqual(Buffer.from(given), Buffer.from(expected));
    });
  };
  githubCareful(sub, store, verify, { guarded: false });
}

function githubVerifyIgnoresExtra(sub, store) {
  const webhooks = new octokit.Webhooks({
    secret: GITHUB_SECRETS[0],
    additionalSecrets: GITHUB_SECRETS.slice(1),
  });
  // BUG: only verifyAndReceive falls back to additionalSecrets; webhooks.verify uses the first.
  githubCareful(sub, store, (body, signature) => webhooks.verify(body, signature));
}

function githubVerifyReserialized(sub, store) {
  const webhooks = new octokit.Webhooks({ secret: GITHUB_SECRETS[0] });
  webhooks.onAny(async ({ id }) => githubOnce(store, id));
  sub.post('/webhooks', express.json({ type: () => true }), async (req, res) => {
    try {
      await webhooks.verifyAndReceive({
        id: req.get('x-github-delivery'),
        name: req.get('x-github-event'),
        payload: JSON.stringify(req.body), // BUG: the parsed body re-serialized, not the bytes
        signature: req.get('x-hub-signature-256'),
      });
    } catch (err) {
      return res.status(err.status || 400).json({ error: 'rejected' });
    }
    return res.json({ ok: true });
  });
}

function githubDedupeBeforeVerify(sub, store) {
  const webhooks = new octokit.Webhooks({ secret: GITHUB_SECRETS[0] });
  sub.post('/webhooks', express.raw({ type: () => true }), async (req, res) => {
    const id = req.get('x-github-delivery');
    // BUG: the id is claimed before the signature is checked: a forged copy burns it.
    const outcome = store.claim(id, id);
    if (outcome === 'duplicate') return res.json({ duplicate: true });
    if (outcome === 'busy') return res.set('Retry-After', '1').status(503).json({ error: 'busy' });
    const body = Buffer.isBuffer(req.body) ? req.body.toString('utf8') : '';
    let verified = false;
    try {
      verified = await webhooks.verify(body, req.get('x-hub-signature-256') || '');
    } catch (err) {
      verified = false;
    }
    if (!verified) return res.status(400).json({ error: 'bad signature' });
    await store.commit(id, id);
    return res.json({});
  });
}

function githubNoDedupe(sub, store) {
  const webhooks = new octokit.Webhooks({ secret: GITHUB_SECRETS[0] });
  webhooks.onAny(async ({ id }) => {
    store.row(id, id).deliveries += 1;
    await store.commit(id, id); // BUG: never asks whether this delivery id was seen
  });
  githubMiddleware(sub, webhooks);
}

// ---------------------------------------------------------------------------------------------

const VARIANTS = {
  'stripe-docs': (sub, store) => stripeDocs(sub, store),
  'stripe-correct': stripeCorrect,
  'svix-docs': (sub, store) => svixDocs(sub, store, { withReturn: false }),
  'svix-docs-return': (sub, store) => svixDocs(sub, store, { withReturn: true }),
  'svix-correct': svixCorrect,
  'stripe-json-reserialized': stripeJsonReserialized,
  'stripe-catch-500': (sub, store) => stripeDocs(sub, store, { failureStatus: 500 }),
  'stripe-tolerance-zero': (sub, store) => stripeDocs(sub, store, { tolerance: 0 }),
  'stripe-tolerance-ms': (sub, store) => stripeDocs(sub, store, { tolerance: 5 * 60 * 1000 }),
  'stripe-dedupe-before-verify': stripeDedupeBeforeVerify,
  'stripe-dedupe-signature': stripeDedupeSignature,
  'stripe-ack-before-commit': stripeAckBeforeCommit,
  'stripe-first-secret-only': stripeFirstSecretOnly,
  'stripe-trust-loopback': stripeTrustLoopback,
  'stripe-html-500': stripeHtml500,
  'stripe-no-limit': (sub, store) => stripeDocs(sub, store, { limit: Infinity }),
  'svix-first-secret-only': (sub, store) => svixSample(sub, store),
  'svix-raw-secret': (sub, store) => {
    // BUG: the prefix is stripped by hand and the base64 text used as the raw key.
    const wh = new Webhook(SVIX_SECRETS[0].replace(/^whsec_/, ''), { format: 'raw' });
    svixSample(sub, store, { verify: (req) => wh.verify(req.body, req.headers) });
  },
  'svix-rawheaders-case': svixRawheadersCase,
  'svix-latin1-body': svixLatin1Body,
  'svix-rethrow-non-verification': svixRethrowNonVerification,
  'svix-check-then-act': svixCheckThenAct,
  'svix-inflight-200': svixInflight200,
  'svix-async-after-200': svixAsyncAfter200,
  'svix-no-dedupe': svixNoDedupe,
  'github-docs': (sub, store) => githubDocs(sub, store),
  'github-correct': githubCorrect,
  'github-verify-ignores-extra': githubVerifyIgnoresExtra,
  'github-verify-reserialized': githubVerifyReserialized,
  'github-dedupe-before-verify': githubDedupeBeforeVerify,
  'github-short-timeout': (sub, store) => githubDocs(sub, store, { timeout: 5 }),
  'github-no-dedupe': githubNoDedupe,
  'github-algorithm-from-header': githubAlgorithmFromHeader,
};

async function main() {
  octokit = await import('@octokit/webhooks');
  const app = express();
  for (const [name, build] of Object.entries(VARIANTS)) {
    const sub = express();
    const store = new Store();
    mountProbe(sub, store);
    build(sub, store);
    app.use(`/${name}`, sub);
  }
  const server = app.listen(PORT, '127.0.0.1', () => {
    process.stdout.write(`listening ${server.address().port}\n`);
  });
}

main().catch((err) => {
  process.stderr.write(`${err.stack || err}\n`);
  process.exit(1);
});
