"""hookproof's reference receiver: verification, the durable inbox, the ASGI middleware.

This package is the leaf of hookproof: it depends on starlette and sqlite-utils only (psycopg
optionally) and owns the wire scheme, signing and verifying alike.
"""

from receiver.exceptions import (
    ConfigurationError,
    InboxError,
    InboxUnavailable,
    InvalidPayload,
    MalformedHeader,
    MissingHeader,
    ReceiverError,
    SignatureMismatch,
    TimestampTooNew,
    TimestampTooOld,
    VerificationError,
)
from receiver.signing import (
    DEFAULT_TOLERANCE_S,
    GitHubStyle,
    Scheme,
    Secret,
    StandardWebhooks,
    StripeStyle,
    VerifiedMessage,
    Verifier,
    scheme_named,
)

__all__ = [
    "DEFAULT_TOLERANCE_S",
    "ConfigurationError",
    "GitHubStyle",
    "InboxError",
    "InboxUnavailable",
    "InvalidPayload",
    "MalformedHeader",
    "MissingHeader",
    "ReceiverError",
    "Scheme",
    "Secret",
    "SignatureMismatch",
    "StandardWebhooks",
    "StripeStyle",
    "TimestampTooNew",
    "TimestampTooOld",
    "VerificationError",
    "VerifiedMessage",
    "Verifier",
    "scheme_named",
]
