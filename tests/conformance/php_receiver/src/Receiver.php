<?php
// The correct receiver, written the way a careful PHP team writes one from the
// Standard Webhooks spec: raw php://input bytes, every secret and every v1 entry
// compared with hash_equals, a 5-minute window both ways, and an inbox row claimed
// in a transaction (in_flight) then committed together with the effect before the 2xx.
// Each step is a method so that a variant (variants.php) can get exactly one wrong.

declare(strict_types=1);

final class Answer
{
    /** @param array<string, mixed> $document @param array<string, string> $headers */
    public function __construct(
        public readonly int $status,
        public readonly array $document,
        public readonly array $headers = [],
    ) {
    }

    public function send(): void
    {
        send_json($this->status, $this->document, 'application/json', $this->headers);
    }
}

final class Delivery
{
    public function __construct(public readonly string $eventId, public readonly mixed $payload)
    {
    }
}

class Receiver
{
    public function __construct(protected readonly Config $config, protected readonly Store $store)
    {
    }

    public function serveWebhook(): void
    {
        try {
            $this->handleDelivery()->send();
        } catch (Refusal $refusal) {
            send_problem($refusal);
        }
    }

    public function serveProbe(string $eventId): void
    {
        try {
            $this->probe($eventId)->send();
        } catch (Refusal $refusal) {
            send_problem($refusal);
        }
    }

    protected function handleDelivery(): Answer
    {
        $this->requirePost();
        $body = $this->readBody();
        $delivery = $this->verifiedDelivery($body);
        return $this->process($delivery);
    }

    protected function requirePost(): void
    {
        if (($_SERVER['REQUEST_METHOD'] ?? '') !== 'POST') {
            throw new Refusal(405, 'method-not-allowed', 'deliveries are POSTed', ['Allow' => 'POST']);
        }
    }

    protected function readBody(): string
    {
        $declared = $_SERVER['CONTENT_LENGTH'] ?? '';
        if ($declared !== '') {
            if (!is_string($declared) || !ctype_digit($declared)) {
                throw new Refusal(400, 'invalid-content-length', 'Content-Length is not a number');
            }
            if (strlen($declared) > 18 || (int) $declared > $this->config->maxBody) {
                throw new Refusal(413, 'body-too-large', "the body limit is {$this->config->maxBody} bytes");
            }
        }
        $input = fopen('php://input', 'rb');
        if ($input === false) {
            throw new RuntimeException('php://input cannot be opened');
        }
        $body = stream_get_contents($input, $this->config->maxBody + 1);
        fclose($input);
        if ($body === false) {
            throw new RuntimeException('php://input cannot be read');
        }
        if (strlen($body) > $this->config->maxBody) {
            throw new Refusal(413, 'body-too-large', "the body limit is {$this->config->maxBody} bytes");
        }
        return $body;
    }

    /** How the app reads a header; frameworks' header bags may give string|list<string>|null. */
    protected function header(string $name): mixed
    {
        return request_header($name);
    }

    protected function requiredHeader(string $name): mixed
    {
        $value = $this->header($name);
        if ($value === null) {
            throw new Refusal(400, 'missing-header', "the $name header is missing");
        }
        return $value;
    }

    protected function verifiedDelivery(string $body): Delivery
    {
        $eventId = $this->eventId($this->requiredHeader('webhook-id'));
        $timestampHeader = $this->requiredHeader('webhook-timestamp');
        $signatureHeader = $this->requiredHeader('webhook-signature');
        $this->checkTolerance($this->timestamp($timestampHeader));
        $this->verifySignature($this->signedContent($eventId, $timestampHeader, $body), $signatureHeader);
        return new Delivery($eventId, $this->decodePayload($body));
    }

    protected function eventId(string $header): string
    {
        if (preg_match('/^[\x21-\x2b\x2d-\x7e]{1,255}$/D', $header) !== 1) {
            throw new Refusal(400, 'malformed-header', 'webhook-id must be 1 to 255 visible ASCII characters');
        }
        return $header;
    }

    protected function timestamp(string $header): int
    {
        if (preg_match('/^[0-9]{1,12}$/D', $header) !== 1) {
            throw new Refusal(400, 'malformed-header', 'webhook-timestamp must be Unix seconds');
        }
        return (int) $header;
    }

    protected function checkTolerance(int $timestamp): void
    {
        if (abs(time() - $timestamp) > $this->config->toleranceSeconds) {
            throw new Refusal(401, 'timestamp-outside-tolerance', 'webhook-timestamp is too old or too new');
        }
    }

    protected function signedContent(string $eventId, string $timestampHeader, string $body): string
    {
        return "$eventId.$timestampHeader.$body";
    }

    /** @return list<string> raw HMAC keys, one per active secret */
    protected function keys(): array
    {
        return array_map(static function (string $secret): string {
            $key = base64_decode(str_starts_with($secret, 'whsec_') ? substr($secret, 6) : $secret, true);
            if ($key === false || $key === '') {
                throw new RuntimeException('a configured secret is not whsec_<base64>');
            }
            return $key;
        }, $this->config->secrets);
    }

    /** @return list<string> the base64 values of every v1 entry of the header */
    protected function signatureCandidates(string $header): array
    {
        $candidates = [];
        foreach (preg_split('/ +/', trim($header), -1, PREG_SPLIT_NO_EMPTY) ?: [] as $entry) {
            $parts = explode(',', $entry, 2);
            if (count($parts) !== 2 || $parts[0] === '' || $parts[1] === '' || str_contains($parts[1], ',')) {
                throw new Refusal(400, 'malformed-header', 'webhook-signature entries are <version>,<signature>');
            }
            if ($parts[0] === 'v1') {
                $candidates[] = $parts[1];
            }
        }
        if ($candidates === []) {
            throw new Refusal(400, 'malformed-header', 'webhook-signature has no v1 entry');
        }
        return $candidates;
    }

    protected function entryMatches(string $expected, string $given): bool
    {
        return hash_equals($expected, $given);
    }

    protected function verifySignature(string $signedContent, string $header): void
    {
        $candidates = $this->signatureCandidates($header);
        foreach ($this->keys() as $key) {
            $expected = base64_encode(hash_hmac('sha256', $signedContent, $key, true));
            foreach ($candidates as $given) {
                if ($this->entryMatches($expected, $given)) {
                    return;
                }
            }
        }
        throw new Refusal(401, 'signature-mismatch', 'no signature matches an active secret');
    }

    protected function decodePayload(string $body): mixed
    {
        try {
            $payload = json_decode($body, true, 512, JSON_THROW_ON_ERROR);
        } catch (JsonException $error) {
            throw new Refusal(400, 'invalid-payload', 'the body is not JSON: ' . $error->getMessage());
        }
        if (!is_array($payload)) {
            throw new Refusal(400, 'invalid-payload', 'the body is not a JSON object');
        }
        return $payload;
    }

    /** The handler's own work (a CRM call, a mail): time during which the claim is held. */
    protected function businessWork(mixed $payload): void
    {
        usleep($this->config->businessWorkMs * 1000);
    }

    protected function process(Delivery $delivery): Answer
    {
        $eventId = $delivery->eventId;
        $claim = bin2hex(random_bytes(8));
        $now = microtime(true);
        $seen = $this->store->transaction(function (PDO $pdo) use ($eventId, $claim, $now): ?array {
            $row = $this->store->inboxRow($eventId);
            if ($row === null) {
                $pdo->prepare("INSERT INTO webhook_inbox (event_id, state, claim, claimed_at, deliveries, created_at)
                               VALUES (?, 'in_flight', ?, ?, 1, ?)")->execute([$eventId, $claim, $now, $now]);
                return null;
            }
            $pdo->prepare('UPDATE webhook_inbox SET deliveries = deliveries + 1 WHERE event_id = ?')->execute([$eventId]);
            if ($row['state'] === 'committed') {
                return $row;
            }
            $leaseLeft = (float) $row['claimed_at'] + $this->config->leaseSeconds - $now;
            if ($leaseLeft > 0) {
                return $row + ['lease_left' => $leaseLeft];
            }
            $pdo->prepare("UPDATE webhook_inbox SET state = 'in_flight', claim = ?, claimed_at = ? WHERE event_id = ?")
                ->execute([$claim, $now, $eventId]);
            return null;
        });
        if ($seen !== null && $seen['state'] === 'committed') {
            return new Answer((int) $seen['status'], ['event_id' => $eventId, 'duplicate' => true]);
        }
        if ($seen !== null) {
            $retryAfter = (string) max(1, (int) ceil($seen['lease_left']));
            throw new Refusal($this->config->inFlightStatus, 'in-flight', 'this event is being handled by another request', ['Retry-After' => $retryAfter]);
        }
        try {
            $this->businessWork($delivery->payload);
            $this->store->transaction(function (PDO $pdo) use ($eventId, $claim, $delivery): void {
                $commit = $pdo->prepare("UPDATE webhook_inbox SET state = 'committed', status = 200
                                         WHERE event_id = ? AND claim = ? AND state = 'in_flight'");
                $commit->execute([$eventId, $claim]);
                if ($commit->rowCount() !== 1) {
                    throw new Refusal(503, 'claim-lost', 'another request took this event over', ['Retry-After' => '1']);
                }
                Store::applyEffect($pdo, $eventId, $delivery->payload);
            });
        } catch (Throwable $error) {
            $this->store->pdo->prepare('UPDATE webhook_inbox SET claimed_at = 0 WHERE event_id = ? AND claim = ?')
                ->execute([$eventId, $claim]);
            throw $error;
        }
        return new Answer(200, ['ok' => true, 'event_id' => $eventId]);
    }

    protected function probe(string $eventId): Answer
    {
        $authorization = request_header('Authorization') ?? '';
        if ($this->config->probeToken === '' || !hash_equals('Bearer ' . $this->config->probeToken, $authorization)) {
            throw new Refusal(401, 'unauthorized', 'a valid probe token is required');
        }
        $row = $this->store->inboxRow($eventId);
        if ($row === null) {
            throw new Refusal(404, 'unknown-event', 'no such event');
        }
        return new Answer(200, [
            'event_id' => $eventId,
            'status' => $row['state'] === 'committed' ? 'committed' : 'in_flight',
            'effects' => $this->store->effectCount($eventId),
            'deliveries' => (int) $row['deliveries'],
        ]);
    }
}
