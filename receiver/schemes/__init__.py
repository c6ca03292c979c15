"""The wire schemes, one module each: ``standard`` (Standard Webhooks, the default), ``stripe``
and ``github``; ``base`` holds what they share and the :class:`Scheme` interface; ``registry``
names them (``SCHEMES``). :mod:`receiver.signing` is the public face that users import from."""

from receiver.schemes.base import DEFAULT_TOLERANCE_S, Scheme, Secret, VerifiedMessage
from receiver.schemes.github import GitHubStyle
from receiver.schemes.registry import SCHEMES, event_id_of, redact_signatures, scheme_named
from receiver.schemes.standard import StandardWebhooks
from receiver.schemes.stripe import StripeStyle

__all__ = [
    "DEFAULT_TOLERANCE_S",
    "SCHEMES",
    "GitHubStyle",
    "Scheme",
    "Secret",
    "StandardWebhooks",
    "StripeStyle",
    "VerifiedMessage",
    "event_id_of",
    "redact_signatures",
    "scheme_named",
]
