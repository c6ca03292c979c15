<?php
// Framework-style bootstrap shared by every variant: warnings and notices become
// ErrorException (as Laravel's HandleExceptions does), an uncaught throwable is a
// generic 500 page, and the configuration comes from the environment.

declare(strict_types=1);

ini_set('display_errors', '0');
ini_set('log_errors', '1');
ini_set('error_log', 'php://stderr');

set_error_handler(static function (int $severity, string $message, string $file, int $line): bool {
    if ($severity === E_DEPRECATED || $severity === E_USER_DEPRECATED) {
        return true; // logged by frameworks, never thrown
    }
    throw new ErrorException($message, 0, $severity, $file, $line);
});

set_exception_handler(static function (Throwable $error): void {
    error_log('[php_receiver] uncaught ' . get_class($error) . ': ' . $error->getMessage());
    if (!headers_sent()) {
        http_response_code(500);
        header('Content-Type: application/json');
    }
    echo json_encode(['message' => 'Server Error']);
});

final class Config
{
    /** @param list<string> $secrets */
    public function __construct(
        public readonly array $secrets,
        public readonly string $probeToken,
        public readonly int $maxBody,
        public readonly string $dataDir,
        public readonly int $toleranceSeconds,
        public readonly int $businessWorkMs,
        public readonly int $leaseSeconds,
        public readonly int $inFlightStatus,
    ) {
    }

    private static function integer(string $name, int $default): int
    {
        $value = getenv($name);
        return $value === false || $value === '' ? $default : (int) $value;
    }

    public static function fromEnvironment(): self
    {
        $secrets = array_values(array_filter(array_map('trim', explode(',', (string) getenv('SECRETS')))));
        $dataDir = (string) getenv('PHP_RECEIVER_DATA');
        if ($secrets === [] || $dataDir === '') {
            throw new RuntimeException('SECRETS and PHP_RECEIVER_DATA must be set');
        }
        return new self(
            $secrets,
            (string) getenv('PROBE_TOKEN'),
            self::integer('MAX_BODY', 1048576),
            $dataDir,
            self::integer('TOLERANCE', 300),
            self::integer('BUSINESS_WORK_MS', 20),
            self::integer('LEASE_SECONDS', 30),
            self::integer('IN_FLIGHT_STATUS', 503),
        );
    }
}
