/*
 * A zoo of Standard Webhooks receivers written the way a partner's Java team would write them:
 * JDK 17 only (com.sun.net.httpserver, javax.crypto, java.util.concurrent), one process, one
 * variant per path prefix, each variant with its own in-memory store.
 *
 *   POST /<variant>/webhooks                    the receiver
 *   GET  /<variant>/_hookproof/events/<id>      the hookproof probe (Bearer PROBE_TOKEN)
 *   GET  /healthz                               liveness
 *
 * Config (environment): SECRETS (comma-separated whsec_… secrets, all active), PROBE_TOKEN
 * (probe off when empty), MAX_BODY (bytes, default 1 MiB), PORT (0 = any free port; prints
 * "listening <port>" once listening), STORE_WRITE_MS (simulated latency of the durable write,
 * default 25).
 *
 * BUGS (variant: the one bug it ships; `correct` ships none)
 *   correct              none: raw bytes, every secret and entry, constant time, +-300 s, claim → commit → 2xx, 503 in flight
 *   platform-charset     new String(body) in the container's POSIX locale (US-ASCII) and getBytes(UTF_8) for the HMAC
 *   reserialize          verifies the JSON re-emitted by the parser (compact, escapes decoded) instead of the raw body
 *   b64-throws           Base64.getDecoder().decode on each entry without catching IllegalArgumentException → 500
 *   first-entry-only     header.split(" ")[0]: only the first signature entry is ever tried
 *   no-version-check     entry.split(",")[1] as the signature: no `v1` check, and an entry without a comma → 500
 *   parseint-ts          Integer.parseInt(timestamp) with the NumberFormatException uncaught → 500
 *   millis-tolerance     tolerance constant in milliseconds (300_000) compared with a difference in seconds
 *   no-abs               now - ts > 300 without Math.abs: timestamps in the future are never too new
 *   unsigned-accepted    verifies only when a webhook-signature header is present
 *   first-secret-only    uses SECRETS[0] only: a delivery signed with the other active secret is refused
 *   catch-all-200        catch (Exception e) → 200 "so the platform stops retrying", refusals included
 *   empty-body-500       sniffs body[0] == '{' before anything else: an empty body → ArrayIndexOutOfBounds → 500
 *   no-body-limit        readAllBytes() with no cap and no Content-Length check: never 413
 *   first-header-only    getFirst() on every header: a repeated webhook-id/-timestamp/-signature is not noticed
 *   body-hash-dedupe     dedupes on SHA-256 of the body instead of webhook-id
 *   claim-before-verify  putIfAbsent(webhook-id) before verifying, never released: a forged copy poisons the id
 *   race-dedupe          containsKey → process → put, no in-flight state: concurrent copies all apply the effect
 *   ack-before-commit    writes the 200 first, then applies the effect and records the id
 *   async-ack            answers 200 after verifying, then processes on a worker executor
 *   dup-500              inserts the id and lets the duplicate-key exception escape → 500 on every duplicate
 *   short-ttl-dedupe     dedupe records live in a cache that expires them 2 s after they are written
 *   tenant-cast          casts Json.parse(body) to Map for data.tenant before verifying (JsonException
 *                        caught): null, a list, a string or a number → ClassCastException → 500
 *
 * CONVENTIONS (not bugs by the Standard Webhooks spec, where any non-2xx is retried; hookproof's
 * in-flight scenarios want 2xx or 503, so `correct` answers a copy in flight 503 + Retry-After)
 *   inflight-409         answers a copy that arrives while the first is in flight 409 + Retry-After
 *   inflight-429         answers a copy that arrives while the first is in flight 429 + Retry-After
 */

import com.sun.net.httpserver.Headers;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.Charset;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.security.InvalidKeyException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

public final class WebhookZoo {

    enum Bug {
        NONE("correct"),
        PLATFORM_CHARSET("platform-charset"),
        RESERIALIZE("reserialize"),
        B64_THROWS("b64-throws"),
        FIRST_ENTRY_ONLY("first-entry-only"),
        NO_VERSION_CHECK("no-version-check"),
        PARSEINT_TS("parseint-ts"),
        MILLIS_TOLERANCE("millis-tolerance"),
        NO_ABS("no-abs"),
        UNSIGNED_ACCEPTED("unsigned-accepted"),
        FIRST_SECRET_ONLY("first-secret-only"),
        CATCH_ALL_200("catch-all-200"),
        EMPTY_BODY_500("empty-body-500"),
        NO_BODY_LIMIT("no-body-limit"),
        FIRST_HEADER_ONLY("first-header-only"),
        BODY_HASH_DEDUPE("body-hash-dedupe"),
        CLAIM_BEFORE_VERIFY("claim-before-verify"),
        RACE_DEDUPE("race-dedupe"),
        ACK_BEFORE_COMMIT("ack-before-commit"),
        ASYNC_ACK("async-ack"),
        DUP_500("dup-500"),
        SHORT_TTL_DEDUPE("short-ttl-dedupe"),
        TENANT_CAST("tenant-cast"),
        INFLIGHT_409("inflight-409"),
        INFLIGHT_429("inflight-429");

        final String path;

        Bug(String path) {
            this.path = path;
        }
    }

    static final long TOLERANCE_SECONDS = 300;
    static final long TOLERANCE_MS = 5 * 60 * 1000; // the millis-tolerance variant's constant
    static final long SHORT_TTL_NANOS = 2_000_000_000L;
    static final String PROBE_SEGMENT = "_hookproof/events";
    /** What `new String(bytes)` decodes with on a JDK 17 started in a bare container (POSIX locale). */
    static final Charset POSIX_PLATFORM_CHARSET = StandardCharsets.US_ASCII;

    // ---------------------------------------------------------------------------------------------
    // Refusals: thrown by the pipeline, turned into application/problem+json by the handler.

    static final class Refusal extends RuntimeException {
        final int status;
        final String type;
        final Map<String, String> headers = new LinkedHashMap<>();

        Refusal(int status, String type, String detail) {
            super(detail, null, false, false);
            this.status = status;
            this.type = type;
        }

        Refusal header(String name, String value) {
            headers.put(name, value);
            return this;
        }
    }

    /** What the dup-500 variant's "database" throws on a second insert of a key. */
    static final class DuplicateKeyException extends RuntimeException {
        DuplicateKeyException(String key) {
            super("duplicate key value violates unique constraint \"inbox_pkey\": " + key);
        }
    }

    // ---------------------------------------------------------------------------------------------
    // The store: a dedupe inbox keyed on the dedupe key, and a ledger per webhook-id for the probe
    // (status, how often the effect was applied, how many verified copies arrived).

    enum State { IN_FLIGHT, COMMITTED }

    static final class Claim {
        volatile State state = State.IN_FLIGHT;
        volatile long committedAtNanos;
    }

    static final class Ledger {
        volatile State state = State.IN_FLIGHT;
        final AtomicInteger effects = new AtomicInteger();
        final AtomicInteger deliveries = new AtomicInteger();
    }

    static final class Store {
        final ConcurrentHashMap<String, Claim> inbox = new ConcurrentHashMap<>();
        final ConcurrentHashMap<String, Ledger> ledger = new ConcurrentHashMap<>();
    }

    // ---------------------------------------------------------------------------------------------

    final List<byte[]> secretKeys;
    final String probeToken;
    final int maxBody;
    final long storeWriteMillis;
    final Map<String, Variant> variants = new LinkedHashMap<>();
    final ExecutorService workers = Executors.newFixedThreadPool(4);

    WebhookZoo(List<byte[]> secretKeys, String probeToken, int maxBody, long storeWriteMillis) {
        this.secretKeys = secretKeys;
        this.probeToken = probeToken;
        this.maxBody = maxBody;
        this.storeWriteMillis = storeWriteMillis;
        for (Bug bug : Bug.values()) {
            variants.put(bug.path, new Variant(bug));
        }
    }

    public static void main(String[] args) throws IOException {
        List<byte[]> keys = new ArrayList<>();
        for (String secret : env("SECRETS", "").split(",")) {
            if (!secret.isBlank()) {
                keys.add(decodeSecret(secret.trim()));
            }
        }
        if (keys.isEmpty()) {
            System.err.println("SECRETS is empty: set at least one whsec_ secret");
            System.exit(2);
        }
        WebhookZoo zoo = new WebhookZoo(
                keys,
                env("PROBE_TOKEN", ""),
                Integer.parseInt(env("MAX_BODY", String.valueOf(1024 * 1024))),
                Long.parseLong(env("STORE_WRITE_MS", "25")));
        HttpServer server = HttpServer.create(
                new InetSocketAddress("127.0.0.1", Integer.parseInt(env("PORT", "0"))), 128);
        server.createContext("/", zoo::route);
        server.setExecutor(Executors.newFixedThreadPool(16));
        server.start();
        System.out.println("listening " + server.getAddress().getPort());
        System.out.flush();
    }

    static String env(String name, String fallback) {
        String value = System.getenv(name);
        return value == null ? fallback : value;
    }

    static byte[] decodeSecret(String secret) {
        String encoded = secret.startsWith("whsec_") ? secret.substring("whsec_".length()) : secret;
        return Base64.getDecoder().decode(encoded);
    }

    void route(HttpExchange exchange) throws IOException {
        try {
            String path = exchange.getRequestURI().getRawPath();
            if (path.equals("/healthz")) {
                send(exchange, 200, "application/json", "{\"ok\":true}", Map.of());
                return;
            }
            int slash = path.indexOf('/', 1);
            Variant variant = slash < 0 ? null : variants.get(path.substring(1, slash));
            String rest = slash < 0 ? "" : path.substring(slash + 1);
            if (variant != null && rest.equals("webhooks")) {
                variant.handleWebhook(exchange);
            } else if (variant != null && (rest.equals(PROBE_SEGMENT) || rest.startsWith(PROBE_SEGMENT + "/"))
                    && !probeToken.isEmpty()) {
                variant.handleProbe(exchange, rest.substring(PROBE_SEGMENT.length()));
            } else {
                problem(exchange, new Refusal(404, "not-found", "no such path"));
            }
        } catch (RuntimeException unexpected) {
            // What the framework's default error page would do: a 500, the trace in the log only.
            System.err.println("unhandled: " + unexpected);
            try {
                problem(exchange, new Refusal(500, "internal-error", "internal server error"));
            } catch (IOException | RuntimeException ignored) {
                // the response was already under way
            }
        } finally {
            exchange.close();
        }
    }

    // ---------------------------------------------------------------------------------------------

    final class Variant {
        final Bug bug;
        final Store store = new Store();

        Variant(Bug bug) {
            this.bug = bug;
        }

        void handleWebhook(HttpExchange exchange) throws IOException {
            try {
                receive(exchange);
            } catch (Refusal refusal) {
                if (bug == Bug.CATCH_ALL_200) {
                    send(exchange, 200, "application/json", "{\"received\":true}", Map.of());
                } else {
                    problem(exchange, refusal);
                }
            } catch (RuntimeException unexpected) {
                if (bug == Bug.CATCH_ALL_200) {
                    send(exchange, 200, "application/json", "{\"received\":true}", Map.of());
                } else {
                    throw unexpected;
                }
            }
        }

        void receive(HttpExchange exchange) throws IOException {
            if (!exchange.getRequestMethod().equals("POST")) {
                throw new Refusal(405, "method-not-allowed", "POST only").header("Allow", "POST");
            }
            Headers headers = exchange.getRequestHeaders();
            byte[] body = readBody(exchange);

            if (bug == Bug.EMPTY_BODY_500 && body[0] != '{') {
                throw new Refusal(400, "invalid-json", "the body is not a JSON object");
            }
            if (bug == Bug.TENANT_CAST) { // the tenant picks the secret... before verifying
                Object parsed;
                try {
                    parsed = Json.parse(body);
                } catch (Json.JsonException notJson) {
                    throw new Refusal(400, "invalid-json", "the body is not JSON");
                }
                @SuppressWarnings("unchecked")
                Map<String, Object> event = (Map<String, Object>) parsed;
                Object data = event.get("data");
                if (data instanceof Map<?, ?> fields && fields.get("tenant") instanceof String t) {
                    exchange.getResponseHeaders().set("X-Tenant", t);
                }
            }

            String eventId = singleHeader(headers, "webhook-id");
            String timestamp = singleHeader(headers, "webhook-timestamp");
            List<String> signatureValues = headers.get("webhook-signature");
            if (bug == Bug.FIRST_HEADER_ONLY && signatureValues != null) {
                signatureValues = List.of(headers.getFirst("webhook-signature"));
            }
            if (eventId == null || timestamp == null
                    || (signatureValues == null && bug != Bug.UNSIGNED_ACCEPTED)) {
                throw new Refusal(400, "missing-header",
                        "webhook-id, webhook-timestamp and webhook-signature are required");
            }
            if (!validEventId(eventId)) {
                throw new Refusal(400, "malformed-header", "webhook-id is not a valid id");
            }
            checkTimestamp(timestamp);

            if (bug == Bug.CLAIM_BEFORE_VERIFY) {
                Claim early = new Claim();
                if (store.inbox.putIfAbsent(eventId, early) != null) {
                    duplicate(exchange, eventId);
                    return;
                }
                ledgerOf(eventId);
                if (signatureValues == null || !verify(eventId, timestamp, body, signatureValues)) {
                    throw new Refusal(401, "invalid-signature", "no signature matches");
                }
                checkJson(body);
                commit(eventId, early);
                accepted(exchange, eventId);
                return;
            }

            if (signatureValues != null || bug != Bug.UNSIGNED_ACCEPTED) {
                if (!verify(eventId, timestamp, body, signatureValues)) {
                    throw new Refusal(401, "invalid-signature", "no signature matches");
                }
            }
            if (bug != Bug.ASYNC_ACK) {
                checkJson(body);
            }
            dispatch(exchange, eventId, body);
        }

        // ---- reading -----------------------------------------------------------------------

        byte[] readBody(HttpExchange exchange) throws IOException {
            InputStream in = exchange.getRequestBody();
            if (bug == Bug.NO_BODY_LIMIT) {
                return in.readAllBytes();
            }
            String declared = exchange.getRequestHeaders().getFirst("Content-Length");
            if (declared != null) {
                long length;
                try {
                    length = Long.parseLong(declared.trim());
                } catch (NumberFormatException notANumber) {
                    throw new Refusal(400, "invalid-content-length", "Content-Length is not a number");
                }
                if (length > maxBody) {
                    throw new Refusal(413, "payload-too-large", "the body is larger than " + maxBody + " bytes");
                }
            }
            byte[] body = in.readNBytes(maxBody + 1);
            if (body.length > maxBody) {
                throw new Refusal(413, "payload-too-large", "the body is larger than " + maxBody + " bytes");
            }
            return body;
        }

        String singleHeader(Headers headers, String name) {
            List<String> values = headers.get(name);
            if (values == null || values.isEmpty()) {
                return null;
            }
            if (bug == Bug.FIRST_HEADER_ONLY) {
                return headers.getFirst(name);
            }
            if (values.stream().distinct().count() > 1) {
                throw new Refusal(400, "malformed-header", name + " is repeated with different values");
            }
            return values.get(0);
        }

        boolean validEventId(String eventId) {
            if (eventId.isEmpty() || eventId.length() > 256) {
                return false;
            }
            for (int i = 0; i < eventId.length(); i++) {
                char c = eventId.charAt(i);
                if (c <= 0x20 || c >= 0x7f) {
                    return false;
                }
            }
            return true;
        }

        void checkTimestamp(String timestamp) {
            long seconds;
            if (bug == Bug.PARSEINT_TS) {
                seconds = Integer.parseInt(timestamp);
            } else {
                if (timestamp.isEmpty() || timestamp.length() > 12 || !timestamp.chars().allMatch(c -> c >= '0' && c <= '9')) {
                    throw new Refusal(400, "malformed-header", "webhook-timestamp is not a Unix time in seconds");
                }
                seconds = Long.parseLong(timestamp);
            }
            long now = System.currentTimeMillis() / 1000;
            boolean outside;
            if (bug == Bug.MILLIS_TOLERANCE) {
                outside = Math.abs(now - seconds) > TOLERANCE_MS;
            } else if (bug == Bug.NO_ABS) {
                outside = now - seconds > TOLERANCE_SECONDS;
            } else {
                outside = Math.abs(now - seconds) > TOLERANCE_SECONDS;
            }
            if (outside) {
                throw new Refusal(400, "timestamp-out-of-tolerance",
                        "webhook-timestamp is more than " + TOLERANCE_SECONDS + " s away from now");
            }
        }

        // ---- verifying ---------------------------------------------------------------------

        boolean verify(String eventId, String timestamp, byte[] body, List<String> signatureValues) {
            byte[] signedContent;
            if (bug == Bug.PLATFORM_CHARSET) {
                String payload = new String(body, POSIX_PLATFORM_CHARSET);
                signedContent = (eventId + "." + timestamp + "." + payload).getBytes(StandardCharsets.UTF_8);
            } else if (bug == Bug.RESERIALIZE) {
                byte[] canonical;
                try {
                    canonical = Json.write(Json.parse(body)).getBytes(StandardCharsets.UTF_8);
                } catch (Json.JsonException malformed) {
                    throw new Refusal(400, "invalid-json", "the body is not JSON: " + malformed.getMessage());
                }
                signedContent = concat((eventId + "." + timestamp + ".").getBytes(StandardCharsets.UTF_8), canonical);
            } else {
                signedContent = concat((eventId + "." + timestamp + ".").getBytes(StandardCharsets.UTF_8), body);
            }
            List<byte[]> keys = bug == Bug.FIRST_SECRET_ONLY ? secretKeys.subList(0, 1) : secretKeys;
            List<byte[]> expected = new ArrayList<>();
            for (byte[] key : keys) {
                expected.add(hmacSha256(key, signedContent));
            }
            for (String value : signatureValues) {
                String[] entries = value.split(" ");
                if (bug == Bug.FIRST_ENTRY_ONLY) {
                    entries = new String[] {entries.length == 0 ? "" : entries[0]};
                }
                for (String entry : entries) {
                    byte[] candidate = signatureOf(entry);
                    if (candidate == null) {
                        continue;
                    }
                    for (byte[] mac : expected) {
                        if (MessageDigest.isEqual(mac, candidate)) {
                            return true;
                        }
                    }
                }
            }
            return false;
        }

        /** The decoded signature of one `v1,<base64>` entry, or null when it is not one. */
        byte[] signatureOf(String entry) {
            if (bug == Bug.NO_VERSION_CHECK) {
                String signature = entry.split(",")[1];
                try {
                    return Base64.getDecoder().decode(signature);
                } catch (IllegalArgumentException notBase64) {
                    return null;
                }
            }
            int comma = entry.indexOf(',');
            if (comma < 0 || !entry.substring(0, comma).equals("v1")) {
                return null;
            }
            String signature = entry.substring(comma + 1);
            if (bug == Bug.B64_THROWS) {
                return Base64.getDecoder().decode(signature);
            }
            try {
                return Base64.getDecoder().decode(signature);
            } catch (IllegalArgumentException notBase64) {
                return null;
            }
        }

        void checkJson(byte[] body) {
            try {
                Json.parse(body);
            } catch (Json.JsonException malformed) {
                throw new Refusal(400, "invalid-json", "the body is not JSON: " + malformed.getMessage());
            }
        }

        // ---- deduplicating and applying ----------------------------------------------------

        void dispatch(HttpExchange exchange, String eventId, byte[] body) throws IOException {
            switch (bug) {
                case BODY_HASH_DEDUPE -> claimAndCommit(exchange, eventId, sha256Hex(body));
                case RACE_DEDUPE -> {
                    if (store.inbox.containsKey(eventId)) {
                        duplicate(exchange, eventId);
                        return;
                    }
                    Claim claim = new Claim();
                    ledgerOf(eventId).deliveries.incrementAndGet();
                    applyEffect(eventId);
                    claim.state = State.COMMITTED;
                    store.inbox.put(eventId, claim);
                    ledgerOf(eventId).state = State.COMMITTED;
                    accepted(exchange, eventId);
                }
                case ACK_BEFORE_COMMIT -> {
                    if (store.inbox.containsKey(eventId)) {
                        duplicate(exchange, eventId);
                        return;
                    }
                    accepted(exchange, eventId);
                    exchange.close();
                    // The slow part of the work, after the answer: long enough that a copy sent
                    // at once (a sender whose answer got lost) lands before the record, even on
                    // a loaded machine.
                    pause(4 * storeWriteMillis);
                    Claim claim = new Claim();
                    ledgerOf(eventId).deliveries.incrementAndGet();
                    applyEffect(eventId);
                    claim.state = State.COMMITTED;
                    store.inbox.put(eventId, claim);
                    ledgerOf(eventId).state = State.COMMITTED;
                }
                case ASYNC_ACK -> {
                    send(exchange, 200, "application/json", "{\"event_id\":" + Json.quote(eventId) + ",\"status\":\"accepted\"}", Map.of());
                    workers.submit(() -> {
                        try {
                            checkJson(body);
                            Claim claim = new Claim();
                            if (store.inbox.putIfAbsent(eventId, claim) == null) {
                                commit(eventId, claim);
                            } else {
                                ledgerOf(eventId).deliveries.incrementAndGet();
                            }
                        } catch (RuntimeException failed) {
                            System.err.println("async processing of " + eventId + " failed: " + failed);
                        }
                    });
                }
                case DUP_500 -> {
                    Claim claim = new Claim();
                    if (store.inbox.putIfAbsent(eventId, claim) != null) {
                        ledgerOf(eventId).deliveries.incrementAndGet();
                        throw new DuplicateKeyException(eventId);
                    }
                    commit(eventId, claim);
                    accepted(exchange, eventId);
                }
                default -> claimAndCommit(exchange, eventId, eventId);
            }
        }

        void claimAndCommit(HttpExchange exchange, String eventId, String dedupeKey) throws IOException {
            while (true) {
                Claim claim = new Claim();
                Claim existing = store.inbox.putIfAbsent(dedupeKey, claim);
                if (existing == null) {
                    try {
                        commit(eventId, claim);
                    } catch (RuntimeException failed) {
                        store.inbox.remove(dedupeKey, claim);
                        throw new Refusal(503, "handler-failed", "try again").header("Retry-After", "1");
                    }
                    accepted(exchange, eventId);
                    return;
                }
                if (bug == Bug.SHORT_TTL_DEDUPE && existing.state == State.COMMITTED
                        && System.nanoTime() - existing.committedAtNanos > SHORT_TTL_NANOS) {
                    store.inbox.remove(dedupeKey, existing); // the cache entry expired
                    continue;
                }
                Ledger ledger = store.ledger.get(eventId);
                if (ledger != null) {
                    ledger.deliveries.incrementAndGet();
                }
                if (existing.state == State.COMMITTED) {
                    duplicate(exchange, eventId);
                } else {
                    int status = bug == Bug.INFLIGHT_409 ? 409 : bug == Bug.INFLIGHT_429 ? 429 : 503;
                    throw new Refusal(status, "in-flight", "this event is being processed").header("Retry-After", "1");
                }
                return;
            }
        }

        Ledger ledgerOf(String eventId) {
            Ledger ledger = store.ledger.computeIfAbsent(eventId, id -> new Ledger());
            return ledger;
        }

        /** Applies the event's effect and marks it committed: the durable write. */
        void commit(String eventId, Claim claim) {
            Ledger ledger = ledgerOf(eventId);
            ledger.deliveries.incrementAndGet();
            ledger.state = State.IN_FLIGHT;
            applyEffect(eventId);
            claim.committedAtNanos = System.nanoTime();
            claim.state = State.COMMITTED;
            ledger.state = State.COMMITTED;
        }

        void applyEffect(String eventId) {
            pause(storeWriteMillis);
            ledgerOf(eventId).effects.incrementAndGet();
        }

        void accepted(HttpExchange exchange, String eventId) throws IOException {
            send(exchange, 200, "application/json",
                    "{\"event_id\":" + Json.quote(eventId) + ",\"status\":\"committed\"}", Map.of());
        }

        void duplicate(HttpExchange exchange, String eventId) throws IOException {
            send(exchange, 200, "application/json",
                    "{\"event_id\":" + Json.quote(eventId) + ",\"duplicate\":true,\"status\":\"committed\"}", Map.of());
        }

        // ---- the probe ---------------------------------------------------------------------

        void handleProbe(HttpExchange exchange, String rest) throws IOException {
            try {
                if (!exchange.getRequestMethod().equals("GET")) {
                    throw new Refusal(405, "method-not-allowed", "GET only").header("Allow", "GET");
                }
                String authorization = exchange.getRequestHeaders().getFirst("Authorization");
                byte[] expected = ("Bearer " + probeToken).getBytes(StandardCharsets.UTF_8);
                byte[] given = authorization == null ? new byte[0] : authorization.getBytes(StandardCharsets.UTF_8);
                if (!MessageDigest.isEqual(expected, given)) {
                    throw new Refusal(401, "unauthorized", "a valid Bearer token is required")
                            .header("WWW-Authenticate", "Bearer");
                }
                String rawId = rest.startsWith("/") ? rest.substring(1) : rest;
                if (rawId.isEmpty()) {
                    throw new Refusal(404, "event-id-required", "GET <prefix>/<event_id>");
                }
                String eventId = URLDecoder.decode(rawId, StandardCharsets.UTF_8);
                Ledger ledger = store.ledger.get(eventId);
                if (ledger == null) {
                    throw new Refusal(404, "unknown-event", "no delivery of this event was recorded");
                }
                String status = ledger.state == State.COMMITTED ? "committed" : "in_flight";
                send(exchange, 200, "application/json",
                        "{\"event_id\":" + Json.quote(eventId) + ",\"status\":\"" + status + "\",\"effects\":"
                                + ledger.effects.get() + ",\"deliveries\":" + ledger.deliveries.get() + "}",
                        Map.of());
            } catch (Refusal refusal) {
                problem(exchange, refusal);
            }
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Helpers.

    static void problem(HttpExchange exchange, Refusal refusal) throws IOException {
        String body = "{\"type\":" + Json.quote("https://partner.example/problems/" + refusal.type)
                + ",\"title\":" + Json.quote(refusal.type.replace('-', ' '))
                + ",\"status\":" + refusal.status
                + ",\"detail\":" + Json.quote(String.valueOf(refusal.getMessage())) + "}";
        send(exchange, refusal.status, "application/problem+json", body, refusal.headers);
    }

    static void send(HttpExchange exchange, int status, String contentType, String body, Map<String, String> extra)
            throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        Headers headers = exchange.getResponseHeaders();
        headers.set("Content-Type", contentType);
        extra.forEach(headers::set);
        exchange.sendResponseHeaders(status, bytes.length);
        try (OutputStream out = exchange.getResponseBody()) {
            out.write(bytes);
        }
    }

    static byte[] hmacSha256(byte[] key, byte[] content) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(key, "HmacSHA256"));
            return mac.doFinal(content);
        } catch (NoSuchAlgorithmException | InvalidKeyException impossible) {
            throw new IllegalStateException(impossible);
        }
    }

    static String sha256Hex(byte[] content) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(content));
        } catch (NoSuchAlgorithmException impossible) {
            throw new IllegalStateException(impossible);
        }
    }

    static byte[] concat(byte[] head, byte[] tail) {
        byte[] joined = Arrays.copyOf(head, head.length + tail.length);
        System.arraycopy(tail, 0, joined, head.length, tail.length);
        return joined;
    }

    static void pause(long millis) {
        if (millis <= 0) {
            return;
        }
        try {
            Thread.sleep(millis);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    // ---------------------------------------------------------------------------------------------
    // A small strict JSON parser (RFC 8259: UTF-8, no trailing garbage, depth-limited) and the
    // compact writer the reserialize variant signs with.

    static final class Json {
        static final int MAX_DEPTH = 256;
        static final Object NULL = new Object();

        static final class JsonException extends RuntimeException {
            JsonException(String message) {
                super(message, null, false, false);
            }
        }

        record Number(String text) {}

        private final String text;
        private int pos;

        private Json(String text) {
            this.text = text;
        }

        static Object parse(byte[] body) {
            String text;
            try {
                text = StandardCharsets.UTF_8.newDecoder()
                        .onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT)
                        .decode(ByteBuffer.wrap(body))
                        .toString();
            } catch (CharacterCodingException notUtf8) {
                throw new JsonException("not UTF-8");
            }
            Json parser = new Json(text);
            parser.skipWhitespace();
            Object value = parser.value(0);
            parser.skipWhitespace();
            if (parser.pos != text.length()) {
                throw new JsonException("trailing data at " + parser.pos);
            }
            return value;
        }

        private Object value(int depth) {
            if (depth > MAX_DEPTH) {
                throw new JsonException("nested too deeply");
            }
            if (pos >= text.length()) {
                throw new JsonException("unexpected end of input");
            }
            char c = text.charAt(pos);
            switch (c) {
                case '{':
                    return object(depth);
                case '[':
                    return array(depth);
                case '"':
                    return string();
                case 't':
                    literal("true");
                    return Boolean.TRUE;
                case 'f':
                    literal("false");
                    return Boolean.FALSE;
                case 'n':
                    literal("null");
                    return NULL;
                default:
                    return number();
            }
        }

        private Map<String, Object> object(int depth) {
            Map<String, Object> members = new LinkedHashMap<>();
            pos++;
            skipWhitespace();
            if (peek() == '}') {
                pos++;
                return members;
            }
            while (true) {
                skipWhitespace();
                if (peek() != '"') {
                    throw new JsonException("expected a member name at " + pos);
                }
                String name = string();
                skipWhitespace();
                expect(':');
                skipWhitespace();
                members.put(name, value(depth + 1));
                skipWhitespace();
                char c = next();
                if (c == '}') {
                    return members;
                }
                if (c != ',') {
                    throw new JsonException("expected , or } at " + (pos - 1));
                }
            }
        }

        private List<Object> array(int depth) {
            List<Object> items = new ArrayList<>();
            pos++;
            skipWhitespace();
            if (peek() == ']') {
                pos++;
                return items;
            }
            while (true) {
                skipWhitespace();
                items.add(value(depth + 1));
                skipWhitespace();
                char c = next();
                if (c == ']') {
                    return items;
                }
                if (c != ',') {
                    throw new JsonException("expected , or ] at " + (pos - 1));
                }
            }
        }

        private String string() {
            expect('"');
            StringBuilder out = new StringBuilder();
            while (true) {
                char c = next();
                if (c == '"') {
                    return out.toString();
                }
                if (c < 0x20) {
                    throw new JsonException("control character in a string at " + (pos - 1));
                }
                if (c != '\\') {
                    out.append(c);
                    continue;
                }
                char escape = next();
                switch (escape) {
                    case '"', '\\', '/' -> out.append(escape);
                    case 'b' -> out.append('\b');
                    case 'f' -> out.append('\f');
                    case 'n' -> out.append('\n');
                    case 'r' -> out.append('\r');
                    case 't' -> out.append('\t');
                    case 'u' -> {
                        if (pos + 4 > text.length()) {
                            throw new JsonException("short \\u escape");
                        }
                        try {
                            out.append((char) Integer.parseInt(text.substring(pos, pos + 4), 16));
                        } catch (NumberFormatException badHex) {
                            throw new JsonException("bad \\u escape at " + pos);
                        }
                        pos += 4;
                    }
                    default -> throw new JsonException("bad escape at " + (pos - 1));
                }
            }
        }

        private Number number() {
            int start = pos;
            if (peek() == '-') {
                pos++;
            }
            if (peek() == '0') {
                pos++;
            } else if (isDigit(peek())) {
                while (isDigit(peek())) {
                    pos++;
                }
            } else {
                throw new JsonException("unexpected character at " + pos);
            }
            if (peek() == '.') {
                pos++;
                digits();
            }
            if (peek() == 'e' || peek() == 'E') {
                pos++;
                if (peek() == '+' || peek() == '-') {
                    pos++;
                }
                digits();
            }
            return new Number(text.substring(start, pos));
        }

        private void digits() {
            if (!isDigit(peek())) {
                throw new JsonException("expected a digit at " + pos);
            }
            while (isDigit(peek())) {
                pos++;
            }
        }

        private static boolean isDigit(char c) {
            return c >= '0' && c <= '9';
        }

        private void literal(String word) {
            if (!text.startsWith(word, pos)) {
                throw new JsonException("unexpected literal at " + pos);
            }
            pos += word.length();
        }

        private void skipWhitespace() {
            while (pos < text.length()) {
                char c = text.charAt(pos);
                if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                    return;
                }
                pos++;
            }
        }

        private char peek() {
            return pos < text.length() ? text.charAt(pos) : '\0';
        }

        private char next() {
            if (pos >= text.length()) {
                throw new JsonException("unexpected end of input");
            }
            return text.charAt(pos++);
        }

        private void expect(char wanted) {
            if (next() != wanted) {
                throw new JsonException("expected " + wanted + " at " + (pos - 1));
            }
        }

        // -- writing (compact, like an ObjectMapper with default settings) --

        static String write(Object value) {
            StringBuilder out = new StringBuilder();
            write(value, out);
            return out.toString();
        }

        @SuppressWarnings("unchecked")
        private static void write(Object value, StringBuilder out) {
            if (value == NULL) {
                out.append("null");
            } else if (value instanceof Boolean bool) {
                out.append(bool);
            } else if (value instanceof Number number) {
                out.append(number.text());
            } else if (value instanceof String string) {
                out.append(quote(string));
            } else if (value instanceof Map<?, ?> map) {
                out.append('{');
                boolean first = true;
                for (Map.Entry<String, Object> member : ((Map<String, Object>) map).entrySet()) {
                    if (!first) {
                        out.append(',');
                    }
                    first = false;
                    out.append(quote(member.getKey())).append(':');
                    write(member.getValue(), out);
                }
                out.append('}');
            } else if (value instanceof List<?> list) {
                out.append('[');
                for (int i = 0; i < list.size(); i++) {
                    if (i > 0) {
                        out.append(',');
                    }
                    write(list.get(i), out);
                }
                out.append(']');
            }
        }

        static String quote(String value) {
            StringBuilder out = new StringBuilder("\"");
            for (int i = 0; i < value.length(); i++) {
                char c = value.charAt(i);
                switch (c) {
                    case '"' -> out.append("\\\"");
                    case '\\' -> out.append("\\\\");
                    case '\n' -> out.append("\\n");
                    case '\r' -> out.append("\\r");
                    case '\t' -> out.append("\\t");
                    case '\b' -> out.append("\\b");
                    case '\f' -> out.append("\\f");
                    default -> {
                        if (c < 0x20) {
                            out.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                        } else {
                            out.append(c);
                        }
                    }
                }
            }
            return out.append('"').toString();
        }
    }
}
