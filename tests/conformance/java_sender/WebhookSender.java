/*
 * A Standard Webhooks sender as a platform team writes one in Java 17, JDK only
 * (java.net.http.HttpClient, javax.crypto.Mac, java.util.Base64, ScheduledExecutorService),
 * with variants that each carry ONE realistic bug. Written from docs/check-sender.md alone.
 *
 * Usage:  java WebhookSender   (one process serves every variant, each with its own HttpClient)
 *   env WEBHOOK_SECRET        whsec_<base64 key> (required)
 *   env WEBHOOK_BASE_DELAY    seconds of the first retry delay (default 0.5)
 *   env WEBHOOK_MAX_DELAY     cap of a delay in seconds (default 2)
 *   env WEBHOOK_JITTER        "full" (wait uniform in [0, min(cap, base*2^(n-1))]) or "none"
 *                             (wait exactly min(cap, base*2^(n-1))) (default full)
 *   env WEBHOOK_MAX_ATTEMPTS  attempts per message, first one included (default 4)
 *   env WEBHOOK_TIMEOUT       seconds per request, connect to last byte (default 1)
 *   env PORT                  port of the control API on 127.0.0.1 (default 0: a free one)
 * It prints "listening on PORT" and then serves the control API:
 *   POST /v/VARIANT/deliveries   body: the target URL  ->  202, one new message queued for it
 *   GET  /healthz                ->  200
 *
 * Variant               | its one bug
 * ----------------------+--------------------------------------------------------------------
 * correct               | none: Standard Webhooks signing, backoff with jitter, Retry-After
 * follow-redirects      | HttpClient built with Redirect.NORMAL: follows a 307 to its Location
 * no-request-timeout    | .timeout() not set on the request: waits forever on a silent receiver
 * millis-timestamp      | webhook-timestamp from Instant.now().toEpochMilli() (milliseconds)
 * sign-once             | timestamp and signature computed once, before the retry loop
 * uuid-per-attempt      | webhook-id is a new UUID on every attempt
 * platform-charset      | signed content built with String.getBytes() (platform charset) while
 *                       | the body is sent as UTF-8 bytes: non-ASCII bodies do not verify
 * retry-after-int-only  | Retry-After parsed with Integer.parseInt only: an HTTP date throws,
 *                       | and the retry goes out at once
 * retry-every-non-2xx   | retries every non-2xx status, 400/401/403/410/422 included
 * fixed-delay           | a fixed 0.4 s delay between attempts, no backoff
 * async-overlap         | sendAsync per attempt without waiting for its answer: a slow answer
 *                       | is taken as a failure and the next attempt overlaps it
 * ioexception-delivered | an IOException once the request was written counts as delivered
 *                       | (a connection reset is never retried)
 */

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Base64;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

public final class WebhookSender {
    static final Set<String> VARIANTS = Set.of(
            "correct", "follow-redirects", "no-request-timeout", "millis-timestamp", "sign-once",
            "uuid-per-attempt", "platform-charset", "retry-after-int-only", "retry-every-non-2xx",
            "fixed-delay", "async-overlap", "ioexception-delivered");

    final String variant;
    final byte[] key;
    final double baseDelay;
    final double maxDelay;
    final boolean fullJitter;
    final int maxAttempts;
    final Duration timeout;
    final HttpClient client;
    static final ScheduledExecutorService scheduler = Executors.newScheduledThreadPool(32);

    WebhookSender(String variant) {
        this.variant = variant;
        String secret = env("WEBHOOK_SECRET", null);
        if (secret == null || !secret.startsWith("whsec_")) {
            throw new IllegalArgumentException("WEBHOOK_SECRET must be whsec_<base64>");
        }
        this.key = Base64.getDecoder().decode(secret.substring("whsec_".length()));
        this.baseDelay = Double.parseDouble(env("WEBHOOK_BASE_DELAY", "0.5"));
        this.maxDelay = Double.parseDouble(env("WEBHOOK_MAX_DELAY", "2"));
        this.fullJitter = env("WEBHOOK_JITTER", "full").equals("full");
        this.maxAttempts = Integer.parseInt(env("WEBHOOK_MAX_ATTEMPTS", "4"));
        this.timeout = Duration.ofMillis((long) (Double.parseDouble(env("WEBHOOK_TIMEOUT", "1")) * 1000));
        this.client = HttpClient.newBuilder()
                .followRedirects(is("follow-redirects") ? HttpClient.Redirect.NORMAL : HttpClient.Redirect.NEVER)
                .connectTimeout(timeout)
                .build();
    }

    static String env(String name, String fallback) {
        String value = System.getenv(name);
        return value == null || value.isEmpty() ? fallback : value;
    }

    boolean is(String name) {
        return variant.equals(name);
    }

    /** One message: a stable id and body, delivered to one URL. */
    final class Message {
        final String id = "msg_" + UUID.randomUUID().toString().replace("-", "");
        final URI target;
        final String body;
        int attempt = 0;
        // sign-once: the headers computed before the first attempt, reused on every retry
        String[] precomputed;

        Message(URI target) {
            this.target = target;
            this.body = "{\"type\":\"invoice.paid\",\"id\":\"" + id + "\",\"data\":{"
                    + "\"customer\":\"Zoë Ångström\",\"note\":\"naïve café ✓\",\"amount\":4200}}";
        }
    }

    String sign(String id, String timestamp, String body) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(key, "HmacSHA256"));
            String content = id + "." + timestamp + "." + body;
            byte[] signed = is("platform-charset") ? content.getBytes() : content.getBytes(StandardCharsets.UTF_8);
            return "v1," + Base64.getEncoder().encodeToString(mac.doFinal(signed));
        } catch (java.security.GeneralSecurityException e) {
            throw new IllegalStateException(e);
        }
    }

    /** webhook-id, webhook-timestamp, webhook-signature for this attempt. */
    String[] headers(Message message) {
        if (is("sign-once") && message.precomputed != null) {
            return message.precomputed;
        }
        String id = is("uuid-per-attempt") ? "msg_" + UUID.randomUUID().toString().replace("-", "") : message.id;
        long now = is("millis-timestamp") ? Instant.now().toEpochMilli() : Instant.now().getEpochSecond();
        String timestamp = Long.toString(now);
        String[] result = {id, timestamp, sign(id, timestamp, message.body)};
        message.precomputed = result;
        return result;
    }

    HttpRequest request(Message message) {
        String[] h = headers(message);
        HttpRequest.Builder builder = HttpRequest.newBuilder(message.target)
                .header("content-type", "application/json")
                .header("webhook-id", h[0])
                .header("webhook-timestamp", h[1])
                .header("webhook-signature", h[2])
                .POST(HttpRequest.BodyPublishers.ofByteArray(message.body.getBytes(StandardCharsets.UTF_8)));
        if (!is("no-request-timeout")) {
            builder.timeout(timeout);
        }
        return builder.build();
    }

    /** Backoff before attempt n+1, after attempt n (n >= 1), in milliseconds. */
    long backoffMillis(int attemptsMade) {
        if (is("fixed-delay")) {
            return 400;
        }
        double ceiling = Math.min(maxDelay, baseDelay * Math.pow(2, attemptsMade - 1));
        double seconds = fullJitter ? ThreadLocalRandom.current().nextDouble() * ceiling : ceiling;
        return (long) (seconds * 1000);
    }

    /** Milliseconds Retry-After asks for, or -1 when absent or unreadable. */
    long retryAfterMillis(HttpResponse<?> response) {
        String value = response.headers().firstValue("retry-after").orElse(null);
        if (value == null) {
            return -1;
        }
        value = value.trim();
        if (is("retry-after-int-only")) {
            try {
                return Integer.parseInt(value) * 1000L;
            } catch (NumberFormatException e) {
                return 0; // "could not read it: retry now"
            }
        }
        if (value.chars().allMatch(Character::isDigit)) {
            return Long.parseLong(value) * 1000L;
        }
        try {
            Instant when = ZonedDateTime.parse(value, DateTimeFormatter.RFC_1123_DATE_TIME).toInstant();
            return Math.max(0, Duration.between(Instant.now(), when).toMillis());
        } catch (DateTimeParseException e) {
            return -1;
        }
    }

    enum Outcome { DELIVERED, STOP, RETRY }

    Outcome classify(int status) {
        if (status >= 200 && status < 300) {
            return Outcome.DELIVERED;
        }
        if (is("retry-every-non-2xx")) {
            return Outcome.RETRY;
        }
        if (status == 408 || status == 429 || status >= 500) {
            return Outcome.RETRY;
        }
        return Outcome.STOP; // 410 and the other 4xx, 1xx, 3xx: the receiver has to change something
    }

    void enqueue(URI target) {
        Message message = new Message(target);
        scheduler.execute(() -> attempt(message));
    }

    void attempt(Message message) {
        if (is("async-overlap")) {
            attemptAsync(message);
            return;
        }
        message.attempt++;
        long retryAfter = -1;
        Outcome outcome;
        try {
            HttpResponse<Void> response = client.send(request(message), HttpResponse.BodyHandlers.discarding());
            outcome = classify(response.statusCode());
            retryAfter = retryAfterMillis(response);
        } catch (HttpTimeoutException e) {
            outcome = Outcome.RETRY;
        } catch (IOException e) {
            // ioexception-delivered: "the request went out, so the receiver has it"
            outcome = is("ioexception-delivered") && !(e instanceof HttpConnectTimeoutException)
                    ? Outcome.DELIVERED : Outcome.RETRY;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return;
        }
        if (outcome != Outcome.RETRY || message.attempt >= maxAttempts) {
            return;
        }
        long delay = retryAfter >= 0 ? retryAfter : backoffMillis(message.attempt);
        scheduler.schedule(() -> attempt(message), delay, TimeUnit.MILLISECONDS);
    }

    /** async-overlap: fire the attempt, wait the backoff, and send again unless it was delivered by then. */
    void attemptAsync(Message message) {
        message.attempt++;
        AtomicBoolean finished = new AtomicBoolean(false);
        CompletableFuture<HttpResponse<Void>> future =
                client.sendAsync(request(message), HttpResponse.BodyHandlers.discarding());
        future.thenAccept(response -> {
            if (classify(response.statusCode()) != Outcome.RETRY) {
                finished.set(true);
            }
        });
        if (message.attempt >= maxAttempts) {
            return;
        }
        scheduler.schedule(() -> {
            if (!finished.get()) {
                attemptAsync(message);
            }
        }, backoffMillis(message.attempt), TimeUnit.MILLISECONDS);
    }

    static void serve(java.util.Map<String, WebhookSender> senders) throws IOException {
        int port = Integer.parseInt(env("PORT", "0"));
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
        server.createContext("/healthz", exchange -> {
            try (exchange) {
                exchange.sendResponseHeaders(200, -1);
            }
        });
        server.createContext("/v/", exchange -> {
            try (exchange) {
                String[] parts = exchange.getRequestURI().getPath().split("/");
                WebhookSender sender = parts.length == 4 && parts[3].equals("deliveries") ? senders.get(parts[2]) : null;
                if (sender == null) {
                    exchange.sendResponseHeaders(404, -1);
                    return;
                }
                if (!exchange.getRequestMethod().equals("POST")) {
                    exchange.sendResponseHeaders(405, -1);
                    return;
                }
                String url = new String(exchange.getRequestBody().readAllBytes(), StandardCharsets.UTF_8).trim();
                URI target;
                try {
                    target = URI.create(url);
                } catch (IllegalArgumentException e) {
                    exchange.sendResponseHeaders(400, -1);
                    return;
                }
                sender.enqueue(target);
                exchange.sendResponseHeaders(202, -1);
            }
        });
        server.setExecutor(Executors.newFixedThreadPool(4));
        server.start();
        System.out.println("listening on " + server.getAddress().getPort());
        System.out.flush();
    }

    public static void main(String[] args) throws IOException {
        java.util.Map<String, WebhookSender> senders = new java.util.HashMap<>();
        for (String variant : VARIANTS) {
            senders.put(variant, new WebhookSender(variant));
        }
        serve(senders);
    }
}
