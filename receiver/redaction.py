"""Credentials a webhook URL or header may carry, and how they are shown: as :data:`REDACTED`.

Platforms let a partner register a webhook URL with a password in it
(``https://hooks:s3cret@partner.example/webhooks``, HTTP basic auth) or a token in its query
(``…/webhooks?token=…``, as Slack's and many a gateway's URLs do), and endpoints behind a gateway
want an API key or basic auth in a header; an inbox's PostgreSQL DSN carries its password the
same two ways. They are used as given, but nothing shows them: the receiver's inbox line, the
sender's endpoint lists and setup history, ``explain``, exports, metrics, the sandbox's dashboard,
and the conformance runner's reports and reproductions (unless ``--show-secrets``). It lives in
:mod:`receiver`, the package the other two build on, so that each of them applies the same rule.

One rule says what a credential is, for a header's name and a query parameter's alike
(:func:`is_credential`): ``Authorization``, ``Proxy-Authorization``, ``Cookie``, or a name with
``key``, ``token``, ``secret``, ``auth``, ``password`` or ``session`` in it.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = [
    "REDACTED",
    "SCRUBBED_LENGTH",
    "is_credential",
    "is_redacted",
    "shown_url",
    "url_credentials",
]

REDACTED: Final = "<redacted>"
"""What stands where a secret was, wherever one would be shown."""
SCRUBBED_LENGTH: Final = 6
"""The shortest credential scrubbed from free text an endpoint answered: replacing a shorter one
(a two-letter password) everywhere it occurs would mangle the answer rather than hide a secret."""

_CREDENTIAL_WORDS: Final = ("key", "token", "secret", "auth", "password", "session")
_CREDENTIAL_NAMES: Final = frozenset({"authorization", "proxy-authorization", "cookie"})


def is_credential(name: str) -> bool:
    """Whether a header or query parameter named ``name`` presumably carries a credential."""
    lowered = name.lower()
    return lowered in _CREDENTIAL_NAMES or any(word in lowered for word in _CREDENTIAL_WORDS)


def _query_credentials(query: str) -> list[tuple[int, str]]:
    """``(index, raw value)`` of each credential-like parameter of ``query`` split on ``&``."""
    found = []
    for index, pair in enumerate(query.split("&")):
        name, sep, value = pair.partition("=")
        if sep and value and is_credential(unquote(name)):
            found.append((index, value))
    return found


def url_credentials(url: str) -> tuple[str, ...]:
    """The secrets in ``url``, as written and percent-decoded: its password and the values of its
    credential-like query parameters (what echoed text is scrubbed of, from
    :data:`SCRUBBED_LENGTH` characters)."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return ()
    raw = [password] if password else []
    raw += [value for _, value in _query_credentials(parts.query)]
    return tuple(dict.fromkeys(form for value in raw for form in (value, unquote(value))))


def shown_url(url: str, *, show_secrets: bool = False) -> str:
    """``url`` with its password and credential-like query values replaced by :data:`REDACTED`
    (unchanged with ``show_secrets``, or when it carries none)."""
    if show_secrets:
        return url
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    netloc, query = parts.netloc, parts.query
    if password:
        userinfo, _, host = netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        netloc = f"{user}:{REDACTED}@{host}"
    hidden = _query_credentials(query)
    if hidden:
        pairs = query.split("&")
        for index, _ in hidden:
            pairs[index] = pairs[index].partition("=")[0] + "=" + REDACTED
        query = "&".join(pairs)
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def is_redacted(url: str) -> bool:
    """Whether ``url`` was shown without its credentials (a report's target, say)."""
    return REDACTED in url
