"""The receiver's one exception hierarchy.

Every failure the receiver can report is one of these; nothing else escapes its public API::

    ReceiverError
    ├── ConfigurationError          a bad secret, option or database URL (raised at start-up)
    │   └── UnknownMigrations       a database written by a newer version (unknown migrations)
    ├── VerificationError           a delivery that must be refused; carries its HTTP answer
    │   ├── MissingHeader           400  a required signature header is absent
    │   ├── MalformedHeader         400  a header is present but cannot be parsed
    │   ├── InvalidPayload          400  the body is empty, not UTF-8, or not the JSON needed
    │   │   └── PayloadNotIJson     400  JSON but not I-JSON: lone surrogate, NaN, dup key
    │   ├── SignatureMismatch       401  no signature matches any active secret
    │   ├── TimestampTooOld         401  the signed timestamp is older than the tolerance
    │   └── TimestampTooNew         401  the signed timestamp is further ahead than the tolerance
    └── InboxError                  the durable inbox failed
        └── InboxUnavailable        503  the store cannot be reached right now; retry later

Each :class:`VerificationError` names a stable problem ``type`` slug (RFC 9457) and an HTTP status,
and its message never contains a secret or an expected signature.
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "InboxError",
    "InboxUnavailable",
    "InvalidPayload",
    "MalformedHeader",
    "MissingHeader",
    "PayloadNotIJson",
    "ReceiverError",
    "SignatureMismatch",
    "TimestampTooNew",
    "TimestampTooOld",
    "UnknownMigrations",
    "VerificationError",
]


class ReceiverError(Exception):
    """Root of every error raised by the ``receiver`` package."""


class ConfigurationError(ReceiverError):
    """A secret, option or database location is unusable; raised before serving anything."""


class UnknownMigrations(ConfigurationError):
    """A SQLite database records migrations of ``migration_set`` that this version does not know
    (a newer hookproof wrote it); nothing was changed."""

    def __init__(self, migration_set: str, names: list[str]) -> None:
        super().__init__(
            f"the database has {migration_set!r} migrations this version does not know: "
            + ", ".join(names)
        )
        self.migration_set = migration_set
        self.names = names


class VerificationError(ReceiverError):
    """A delivery that must be refused. ``status`` and ``problem_type`` say how to answer it."""

    status: int = 400
    problem_type: str = "verification-failed"
    title: str = "Webhook verification failed"


class MissingHeader(VerificationError):
    status = 400
    problem_type = "missing-header"
    title = "A required webhook header is missing"


class MalformedHeader(VerificationError):
    status = 400
    problem_type = "malformed-header"
    title = "A webhook header is malformed"


class InvalidPayload(VerificationError):
    status = 400
    problem_type = "invalid-payload"
    title = "The webhook body is not a valid payload"


class PayloadNotIJson(InvalidPayload):
    status = 400
    problem_type = "payload-not-i-json"
    title = "The webhook body is not I-JSON (RFC 7493)"


class SignatureMismatch(VerificationError):
    status = 401
    problem_type = "signature-mismatch"
    title = "No signature matches an active secret"


class TimestampTooOld(VerificationError):
    status = 401
    problem_type = "timestamp-outside-tolerance"
    title = "The signed timestamp is outside the tolerance"


class TimestampTooNew(VerificationError):
    status = 401
    problem_type = "timestamp-outside-tolerance"
    title = "The signed timestamp is outside the tolerance"


class InboxError(ReceiverError):
    """The durable inbox failed to record or read an event."""


class InboxUnavailable(InboxError):
    """The inbox store cannot be reached right now; the delivery should be retried later."""
