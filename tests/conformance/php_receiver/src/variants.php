<?php
// One class per broken variant; each overrides the one step it gets wrong, written
// the way the bug is usually shipped. router.php has the one-line table of them.

declare(strict_types=1);

/** `==` instead of hash_equals (loose, and not constant-time). */
final class LooseCompareReceiver extends Receiver
{
    protected function entryMatches(string $expected, string $given): bool
    {
        return $expected == $given;
    }
}

/** Signs json_encode(json_decode(body)): the re-encoded bytes, not the received ones. */
final class ReencodedBodyReceiver extends Receiver
{
    protected function signedContent(string $eventId, string $timestampHeader, string $body): string
    {
        return "$eventId.$timestampHeader." . json_encode(json_decode($body, true));
    }
}

/** A JSON middleware read the php://input stream first; the app reads the same stream again: ''. */
final class ConsumedInputReceiver extends Receiver
{
    protected function readBody(): string
    {
        $input = fopen('php://input', 'rb');
        if ($input === false) {
            throw new RuntimeException('php://input cannot be opened');
        }
        $GLOBALS['parsed_json'] = json_decode((string) stream_get_contents($input), true); // the "framework"
        return (string) stream_get_contents($input); // the app: already at EOF
    }
}

/** base64_decode() without strict on both sides: characters outside the alphabet are dropped. */
final class LenientBase64Receiver extends Receiver
{
    protected function entryMatches(string $expected, string $given): bool
    {
        return hash_equals(base64_decode($expected), base64_decode($given));
    }
}

/** base64_decode($sig, true) returns false on bad input, fed to hash_equals: TypeError, 500. */
final class StrictBase64FalseReceiver extends Receiver
{
    protected function entryMatches(string $expected, string $given): bool
    {
        return hash_equals(base64_decode($expected, true), base64_decode($given, true));
    }
}

/** explode(' ', $header)[0]: only the first signature entry is ever looked at. */
final class FirstEntryOnlyReceiver extends Receiver
{
    protected function signatureCandidates(string $header): array
    {
        return parent::signatureCandidates(explode(' ', $header)[0]);
    }
}

/** explode(',', $entry)[1] for every entry: the version is ignored, no comma is a warning (500). */
final class VersionIgnoredReceiver extends Receiver
{
    protected function signatureCandidates(string $header): array
    {
        return array_map(static fn (string $entry): string => explode(',', $entry)[1], explode(' ', $header));
    }
}

/** intval() of the timestamp: junk is 0 (a 401 instead of a 400), "1700000000abc" passes. */
final class IntvalTimestampReceiver extends Receiver
{
    protected function timestamp(string $header): int
    {
        return intval($header);
    }
}

/** time() - $ts > 300 without abs(): a timestamp from the future is never too new. */
final class NoAbsReceiver extends Receiver
{
    protected function checkTolerance(int $timestamp): void
    {
        if (time() - $timestamp > $this->config->toleranceSeconds) {
            throw new Refusal(401, 'timestamp-outside-tolerance', 'webhook-timestamp is too old');
        }
    }
}

/** The tolerance written in milliseconds (300000) but compared with seconds: 83 hours. */
final class ToleranceMillisecondsReceiver extends Receiver
{
    private const TOLERANCE = 300_000; // 5 minutes, in ms

    protected function checkTolerance(int $timestamp): void
    {
        if (abs(time() - $timestamp) > self::TOLERANCE) {
            throw new Refusal(401, 'timestamp-outside-tolerance', 'webhook-timestamp is too old or too new');
        }
    }
}

/** INSERT OR IGNORE of the webhook-id (an audit row) before verifying: a forgery takes the id. */
final class InsertBeforeVerifyReceiver extends Receiver
{
    protected function handleDelivery(): Answer
    {
        $this->requirePost();
        $body = $this->readBody();
        $eventId = $this->eventId($this->requiredHeader('webhook-id'));
        $pdo = $this->store->pdo;
        $insert = $pdo->prepare("INSERT OR IGNORE INTO webhook_inbox (event_id, state, deliveries, created_at)
                                 VALUES (?, 'received', 1, ?)");
        $insert->execute([$eventId, microtime(true)]);
        if ($insert->rowCount() === 0) {
            $pdo->prepare('UPDATE webhook_inbox SET deliveries = deliveries + 1 WHERE event_id = ?')->execute([$eventId]);
            return new Answer(200, ['event_id' => $eventId, 'duplicate' => true]);
        }
        $delivery = $this->verifiedDelivery($body);
        $this->businessWork($delivery->payload);
        $this->store->transaction(static function (PDO $pdo) use ($delivery): void {
            Store::applyEffect($pdo, $delivery->eventId, $delivery->payload);
            $pdo->prepare("UPDATE webhook_inbox SET state = 'committed', status = 200 WHERE event_id = ?")
                ->execute([$delivery->eventId]);
        });
        return new Answer(200, ['ok' => true, 'event_id' => $eventId]);
    }
}

/** Dedupe by SELECT, then work, then INSERT, no transaction: concurrent copies both apply. */
final class CheckThenInsertReceiver extends Receiver
{
    protected function process(Delivery $delivery): Answer
    {
        $eventId = $delivery->eventId;
        $pdo = $this->store->pdo;
        $row = $this->store->inboxRow($eventId);
        if ($row !== null) {
            $pdo->prepare('UPDATE webhook_inbox SET deliveries = deliveries + 1 WHERE event_id = ?')->execute([$eventId]);
            return new Answer(200, ['event_id' => $eventId, 'duplicate' => true]);
        }
        $this->businessWork($delivery->payload);
        Store::applyEffect($pdo, $eventId, $delivery->payload);
        $pdo->prepare("INSERT INTO webhook_inbox (event_id, state, status, deliveries, created_at)
                       VALUES (?, 'committed', 200, 1, ?)
                       ON CONFLICT (event_id) DO UPDATE SET deliveries = deliveries + 1")
            ->execute([$eventId, microtime(true)]);
        return new Answer(200, ['ok' => true, 'event_id' => $eventId]);
    }
}

/** "Answer fast": 200 written and flushed (fastcgi_finish_request style), then the work and commit. */
final class AckBeforeCommitReceiver extends Receiver
{
    protected function handleDelivery(): Answer
    {
        $this->requirePost();
        $delivery = $this->verifiedDelivery($this->readBody());
        $ack = json_encode(['ok' => true, 'event_id' => $delivery->eventId]);
        http_response_code(200);
        header('Content-Type: application/json');
        header('Content-Length: ' . strlen($ack));
        echo $ack;
        while (ob_get_level() > 0) {
            ob_end_flush();
        }
        flush();
        try {
            $this->process($delivery);
        } catch (Throwable $error) {
            error_log('[php_receiver] after the ack: ' . $error->getMessage());
        }
        exit(0);
    }
}

/** A header bag that splits comma lists into arrays; a string-typed call then throws TypeError: 500. */
final class ArrayHeaderReceiver extends Receiver
{
    protected function header(string $name): mixed
    {
        $value = request_header($name);
        return $value !== null && str_contains($value, ', ') ? explode(', ', $value) : $value;
    }
}

/** file_get_contents('php://input') with no size check. */
final class NoBodyLimitReceiver extends Receiver
{
    protected function readBody(): string
    {
        return (string) file_get_contents('php://input');
    }
}

/** Only the first configured secret is used: deliveries signed with the other one are refused. */
final class FirstSecretOnlyReceiver extends Receiver
{
    protected function keys(): array
    {
        return array_slice(parent::keys(), 0, 1);
    }
}

/** Housekeeping prunes inbox rows older than DEDUPE_TTL = 2 (meant days, used as seconds). */
final class PrunedInboxReceiver extends Receiver
{
    private const DEDUPE_TTL = 2;

    protected function process(Delivery $delivery): Answer
    {
        $this->store->pdo->prepare('DELETE FROM webhook_inbox WHERE created_at < ?')
            ->execute([microtime(true) - self::DEDUPE_TTL]);
        return parent::process($delivery);
    }
}

/** A catch-all answering 200 "so the sender stops retrying": every refusal looks accepted. */
final class CatchAll200Receiver extends Receiver
{
    public function serveWebhook(): void
    {
        try {
            $this->handleDelivery()->send();
        } catch (Throwable $error) {
            error_log('[php_receiver] webhook failed: ' . $error->getMessage());
            http_response_code(200);
            header('Content-Type: application/json');
            echo json_encode(['received' => true]);
        }
    }
}

/** No dedupe lookup, the UNIQUE constraint "handles" duplicates: a redelivery is a PDOException, 500. */
final class UniqueViolationReceiver extends Receiver
{
    protected function process(Delivery $delivery): Answer
    {
        $this->businessWork($delivery->payload);
        $this->store->transaction(static function (PDO $pdo) use ($delivery): void {
            $pdo->prepare("INSERT INTO webhook_inbox (event_id, state, status, deliveries, created_at)
                           VALUES (?, 'committed', 200, 1, ?)")->execute([$delivery->eventId, microtime(true)]);
            Store::applyEffect($pdo, $delivery->eventId, $delivery->payload);
        });
        return new Answer(200, ['ok' => true, 'event_id' => $delivery->eventId]);
    }
}

/** Picks the tenant from the body before verifying, through a function typed for an event (an
 *  array): a body of another shape (null, a string, a number, JSON nested past json_decode's
 *  512 levels) is a TypeError, a 500. */
final class TenantBeforeVerifyReceiver extends Receiver
{
    protected function verifiedDelivery(string $body): Delivery
    {
        self::tenantOf(json_decode($body, true));
        return parent::verifiedDelivery($body);
    }

    private static function tenantOf(array $event): string
    {
        return (string) ($event['data']['tenant'] ?? 'default');
    }
}

/**
 * A debugging aid left in: a signature mismatch is answered with the signature it expected,
 * written by json_encode's defaults, which escape every '/' of the base64 as '\/'.
 */
final class DebugMismatchReceiver extends Receiver
{
    protected function verifySignature(string $signedContent, string $header): void
    {
        try {
            parent::verifySignature($signedContent, $header);
        } catch (Refusal $refusal) {
            $expected = base64_encode(hash_hmac('sha256', $signedContent, $this->keys()[0], true));
            http_response_code(401);
            header('Content-Type: application/json');
            echo json_encode(['error' => 'signature mismatch', 'expected' => 'v1,' . $expected]);
            exit;
        }
    }
}
