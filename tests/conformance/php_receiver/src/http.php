<?php
// Answers: JSON documents, RFC 9457 problems, and the Refusal a handler throws to
// turn down a delivery with a 4xx.

declare(strict_types=1);

final class Refusal extends RuntimeException
{
    /** @param array<string, string> $headers */
    public function __construct(
        public readonly int $status,
        public readonly string $slug,
        public readonly string $detail,
        public readonly array $headers = [],
    ) {
        parent::__construct("$status $slug: $detail");
    }
}

/** @param array<string, string> $headers */
function send_json(int $status, array $document, string $contentType = 'application/json', array $headers = []): void
{
    http_response_code($status);
    header('Content-Type: ' . $contentType);
    foreach ($headers as $name => $value) {
        header("$name: $value");
    }
    echo json_encode($document, JSON_UNESCAPED_SLASHES);
}

function send_problem(Refusal $refusal): void
{
    $titles = [
        400 => 'Bad Request', 401 => 'Unauthorized', 404 => 'Not Found', 405 => 'Method Not Allowed',
        409 => 'Conflict', 413 => 'Content Too Large', 429 => 'Too Many Requests', 503 => 'Service Unavailable',
    ];
    send_json($refusal->status, [
        'type' => 'https://partner.example/problems/' . $refusal->slug,
        'title' => $titles[$refusal->status] ?? 'Error',
        'status' => $refusal->status,
        'detail' => $refusal->detail,
    ], 'application/problem+json', $refusal->headers);
}

/** The value of one request header, as PHP's SAPI exposes it ($_SERVER['HTTP_…']). */
function request_header(string $name): ?string
{
    $key = 'HTTP_' . strtoupper(str_replace('-', '_', $name));
    $value = $_SERVER[$key] ?? null;
    return is_string($value) ? $value : null;
}
