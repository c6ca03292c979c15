"""The scheme registry: every wire scheme by name, and what needs all of them at once.

``SCHEMES`` maps a name to its scheme object; command-line choices are ``sorted(SCHEMES)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from receiver.exceptions import ConfigurationError
from receiver.schemes.base import Scheme
from receiver.schemes.github import GitHubStyle
from receiver.schemes.standard import StandardWebhooks, SvixWebhooks
from receiver.schemes.stripe import StripeStyle

__all__ = ["SCHEMES", "event_id_of", "redact_signatures", "scheme_named", "secret_warnings"]

SCHEMES: Mapping[str, Scheme] = {
    scheme.name: scheme
    for scheme in (StandardWebhooks(), SvixWebhooks(), StripeStyle(), GitHubStyle())
}

_ANY_SIGNATURE = re.compile(
    "|".join(scheme.redaction_pattern.pattern for scheme in SCHEMES.values())
)


def scheme_named(name: str) -> Scheme:
    """The scheme called ``name`` (``standard``, ``svix``, ``stripe`` or ``github``)."""
    try:
        return SCHEMES[name]
    except KeyError:
        choices = ", ".join(SCHEMES)
        raise ConfigurationError(f"unknown scheme {name!r}; choose one of {choices}") from None


def event_id_of(headers: Mapping[str, str], body: bytes) -> str:
    """The event id of a delivery signed with any scheme, ``""`` when none is found.

    The scheme whose signature header the delivery carries decides; without one, the first
    scheme that finds an id. ``headers`` must answer lower-case names (httpx and Starlette
    headers do, whatever the case sent).
    """
    for scheme in SCHEMES.values():
        if scheme.signature_header in headers:
            return scheme.event_id(headers, body)
    for scheme in SCHEMES.values():
        found = scheme.event_id(headers, body)
        if found:
            return found
    return ""


def redact_signatures(text: str, replacement: str = "***") -> str:
    """``text`` with anything shaped like any scheme's signatures or secrets replaced."""
    return _ANY_SIGNATURE.sub(replacement, text)


def secret_warnings(scheme_name: str, secrets: Sequence[str]) -> list[str]:
    """What looks wrong but may be meant in the secrets a delivery is signed with under
    ``scheme_name``: one sentence per reason, naming the secrets it applies to (``secret #1,
    #3 does not start with 'whsec_' ...``). Nothing for an unknown scheme (refused elsewhere)."""
    scheme = SCHEMES.get(scheme_name)
    if scheme is None:
        return []
    odd: dict[str, list[int]] = {}  # the scheme's reason -> the secrets it applies to
    for index, secret in enumerate(secrets, start=1):
        reason = scheme.secret_warning(secret)
        if reason is not None:
            odd.setdefault(reason, []).append(index)
    return ["secret " + ", ".join(f"#{i}" for i in which) + " " + why for why, which in odd.items()]
