<?php
// Standard Webhooks receivers in plain PHP (no Composer), one per variant, served by
// PHP's built-in server on path prefixes:
//
//   POST /<variant>/webhooks                    a delivery
//   GET  /<variant>/_hookproof/events/<id>     the probe (docs/receiver.md), Bearer PROBE_TOKEN
//   GET  /healthz                               200 once the server runs
//
// Run: SECRETS=whsec_a,whsec_b PROBE_TOKEN=t MAX_BODY=65536 PHP_RECEIVER_DATA=/tmp/d \
//      PHP_CLI_SERVER_WORKERS=4 php -S 127.0.0.1:8080 router.php
// Each variant keeps its own SQLite file, PHP_RECEIVER_DATA/<variant>.sqlite. Optional:
// TOLERANCE (300 s), BUSINESS_WORK_MS (20: the handler's work while the claim is held),
// LEASE_SECONDS (30), IN_FLIGHT_STATUS (503: the answer to a copy of an event in flight).
//
// | variant              | its one bug                                                                 |
// |----------------------|-----------------------------------------------------------------------------|
// | correct              | none: raw bytes, hash_equals, all secrets and entries, ±300 s, claim+commit  |
// | loose_compare        | `$expected == $given` instead of hash_equals                                 |
// | reencoded_body       | signs json_encode(json_decode($body)) instead of the received bytes          |
// | consumed_input       | reads php://input from a stream a JSON middleware already read: signs ''     |
// | lenient_base64       | compares base64_decode() (non-strict) of both sides: junk characters dropped |
// | strict_base64_false  | base64_decode($sig, true) === false passed to hash_equals: TypeError, 500    |
// | first_entry_only     | explode(' ', $header)[0]: only the first signature entry is checked          |
// | version_ignored      | explode(',', $entry)[1]: any version accepted, an entry without ',' is 500   |
// | intval_timestamp     | intval($timestamp): junk becomes 0 (401 not 400), "1700000000abc" passes     |
// | no_abs               | time() - $ts > 300 without abs(): future timestamps never too new            |
// | tolerance_ms         | tolerance 300000 (meant ms) compared with seconds: a 83-hour window          |
// | insert_before_verify | INSERT OR IGNORE of webhook-id before verifying: a forgery poisons the id    |
// | check_then_insert    | SELECT, work, INSERT without a transaction: concurrent copies both apply     |
// | ack_before_commit    | 200 written and flushed before the inbox/effect commit                       |
// | array_header         | header bag splits "a, b" into an array; string-typed call: TypeError, 500    |
// | no_body_limit        | file_get_contents('php://input') with no MAX_BODY check                      |
// | first_secret_only    | only the first secret of a rotation is tried                                 |
// | pruned_inbox         | inbox rows pruned after DEDUPE_TTL = 2 (meant days, used as seconds)         |
// | catch_all_200        | catch (Throwable) { http_response_code(200); }: refusals look accepted       |
// | unique_violation     | no dedupe lookup, relies on the UNIQUE constraint: a redelivery is a 500     |
// | tenant_before_verify | tenantOf(array $event) on json_decode($body) before verifying: a TypeError   |
// | debug_mismatch       | a mismatch answers json_encode(['expected' => ...]): every '/' written '\/'   |

declare(strict_types=1);

require __DIR__ . '/src/bootstrap.php';
require __DIR__ . '/src/http.php';
require __DIR__ . '/src/store.php';
require __DIR__ . '/src/Receiver.php';
require __DIR__ . '/src/variants.php';

const VARIANTS = [
    'correct' => Receiver::class,
    'loose_compare' => LooseCompareReceiver::class,
    'reencoded_body' => ReencodedBodyReceiver::class,
    'consumed_input' => ConsumedInputReceiver::class,
    'lenient_base64' => LenientBase64Receiver::class,
    'strict_base64_false' => StrictBase64FalseReceiver::class,
    'first_entry_only' => FirstEntryOnlyReceiver::class,
    'version_ignored' => VersionIgnoredReceiver::class,
    'intval_timestamp' => IntvalTimestampReceiver::class,
    'no_abs' => NoAbsReceiver::class,
    'tolerance_ms' => ToleranceMillisecondsReceiver::class,
    'insert_before_verify' => InsertBeforeVerifyReceiver::class,
    'check_then_insert' => CheckThenInsertReceiver::class,
    'ack_before_commit' => AckBeforeCommitReceiver::class,
    'array_header' => ArrayHeaderReceiver::class,
    'no_body_limit' => NoBodyLimitReceiver::class,
    'first_secret_only' => FirstSecretOnlyReceiver::class,
    'pruned_inbox' => PrunedInboxReceiver::class,
    'catch_all_200' => CatchAll200Receiver::class,
    'unique_violation' => UniqueViolationReceiver::class,
    'tenant_before_verify' => TenantBeforeVerifyReceiver::class,
    'debug_mismatch' => DebugMismatchReceiver::class,
];

$path = (string) parse_url((string) ($_SERVER['REQUEST_URI'] ?? '/'), PHP_URL_PATH);

if ($path === '/healthz') {
    send_json(200, ['ok' => true]);
    return true;
}

if (preg_match('#^/([a-z0-9_]+)/(webhooks|_hookproof/events/(.+))$#D', $path, $match) !== 1
    || !isset(VARIANTS[$match[1]])) {
    send_problem(new Refusal(404, 'not-found', 'no such route'));
    return true;
}

$config = Config::fromEnvironment();
$class = VARIANTS[$match[1]];
$receiver = new $class($config, new Store($config->dataDir . '/' . $match[1] . '.sqlite'));
if ($match[2] === 'webhooks') {
    $receiver->serveWebhook();
} else {
    $receiver->serveProbe(rawurldecode($match[3]));
}
return true;
