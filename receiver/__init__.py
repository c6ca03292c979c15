"""hookproof's reference receiver: verification, the durable inbox, the ASGI middleware.

This package is the leaf of hookproof: it depends on starlette and sqlite-utils only (psycopg
optionally) and owns the wire scheme, signing and verifying alike.

The names below are imported lazily (PEP 562): ``import receiver.signing`` — all the sender and
the runner need — loads neither uvicorn, Starlette's application module nor sqlite-utils.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from receiver.app import ReceiverSettings, create_app
    from receiver.exceptions import (
        ConfigurationError,
        InboxError,
        InboxUnavailable,
        InvalidPayload,
        MalformedHeader,
        MissingHeader,
        PayloadNotIJson,
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
    "PayloadNotIJson",
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


# Where each exported name lives; a module is imported only when one of its names is first used
# (PEP 562), so ``import receiver.signing`` does not pull in the web server or sqlite-utils.
_HOMES: dict[str, str] = {
    "ReceiverSettings": "receiver.app",
    "create_app": "receiver.app",
    "DEFAULT_MAX_BODY": "receiver.middleware",
    "Delivery": "receiver.middleware",
    "HookproofMiddleware": "receiver.middleware",
    "hookproof_delivery": "receiver.middleware",
    "DEFAULT_PROBE_PREFIX": "receiver.probe",
    "running_server": "receiver.server",
    **dict.fromkeys(
        (
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
            "VerificationError",
        ),
        "receiver.exceptions",
    ),
    **dict.fromkeys(
        (
            "DEFAULT_TOLERANCE_S",
            "GitHubStyle",
            "Scheme",
            "Secret",
            "StandardWebhooks",
            "StripeStyle",
            "VerifiedMessage",
            "Verifier",
            "scheme_named",
        ),
        "receiver.signing",
    ),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'receiver' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
