"""hookproof's reference receiver: verification, the durable inbox, the ASGI middleware.

This package is the leaf of hookproof: it depends on starlette and sqlite-utils only (psycopg
optionally) and owns the wire scheme, signing and verifying alike.
"""

from receiver.app import ReceiverSettings, create_app
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
from receiver.middleware import (
    DEFAULT_MAX_BODY,
    Delivery,
    HookproofMiddleware,
    hookproof_delivery,
)
from receiver.probe import DEFAULT_PROBE_PREFIX
from receiver.server import running_server
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
    "DEFAULT_MAX_BODY",
    "DEFAULT_PROBE_PREFIX",
    "DEFAULT_TOLERANCE_S",
    "ConfigurationError",
    "Delivery",
    "GitHubStyle",
    "HookproofMiddleware",
    "InboxError",
    "InboxUnavailable",
    "InvalidPayload",
    "MalformedHeader",
    "MissingHeader",
    "ReceiverError",
    "ReceiverSettings",
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
    "create_app",
    "hookproof_delivery",
    "running_server",
    "scheme_named",
]
