<?php
// The durable store of one variant: a SQLite file (PDO) holding the inbox of event
// ids and the effect rows, shared by the built-in server's worker processes.

declare(strict_types=1);

final class Store
{
    public readonly PDO $pdo;

    public function __construct(string $path)
    {
        $this->pdo = new PDO('sqlite:' . $path, null, null, [
            PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
            PDO::ATTR_TIMEOUT => 10,
            PDO::ATTR_DEFAULT_FETCH_MODE => PDO::FETCH_ASSOC,
        ]);
        $this->pdo->exec('PRAGMA busy_timeout = 10000');
        $this->pdo->exec('PRAGMA journal_mode = WAL');
        $this->pdo->exec('PRAGMA synchronous = FULL');
        $this->pdo->exec(
            'CREATE TABLE IF NOT EXISTS webhook_inbox (
                event_id TEXT PRIMARY KEY,
                state TEXT NOT NULL,
                claim TEXT,
                claimed_at REAL NOT NULL DEFAULT 0,
                status INTEGER,
                deliveries INTEGER NOT NULL DEFAULT 0,
                created_at REAL NOT NULL
            )'
        );
        $this->pdo->exec(
            'CREATE TABLE IF NOT EXISTS webhook_effects (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                event_id TEXT NOT NULL,
                event_type TEXT,
                applied_at REAL NOT NULL
            )'
        );
    }

    /**
     * Run $work in one write transaction (BEGIN IMMEDIATE: the write lock is taken up
     * front, so concurrent workers queue on busy_timeout instead of deadlocking).
     *
     * @template T
     * @param callable(PDO): T $work
     * @return T
     */
    public function transaction(callable $work): mixed
    {
        $this->pdo->exec('BEGIN IMMEDIATE');
        try {
            $result = $work($this->pdo);
            $this->pdo->exec('COMMIT');
            return $result;
        } catch (Throwable $error) {
            $this->pdo->exec('ROLLBACK');
            throw $error;
        }
    }

    /** @return array<string, mixed>|null */
    public function inboxRow(string $eventId): ?array
    {
        $query = $this->pdo->prepare('SELECT * FROM webhook_inbox WHERE event_id = ?');
        $query->execute([$eventId]);
        $row = $query->fetch();
        return $row === false ? null : $row;
    }

    public function effectCount(string $eventId): int
    {
        $query = $this->pdo->prepare('SELECT COUNT(*) FROM webhook_effects WHERE event_id = ?');
        $query->execute([$eventId]);
        return (int) $query->fetchColumn();
    }

    public static function applyEffect(PDO $pdo, string $eventId, mixed $payload): void
    {
        $type = is_array($payload) && is_string($payload['type'] ?? null) ? $payload['type'] : null;
        $pdo->prepare('INSERT INTO webhook_effects (event_id, event_type, applied_at) VALUES (?, ?, ?)')
            ->execute([$eventId, $type, microtime(true)]);
    }
}
