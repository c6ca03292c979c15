"""Credentials a target URL may carry, kept out of everything a run shows.

Platforms let a partner register a webhook URL with a password in it
(``https://hooks:s3cret@partner.example/webhooks``, HTTP basic auth) or a token in its query
(``…/webhooks?token=…``, as Slack's and many a gateway's URLs do). The runner sends to that URL as
given, but never shows the credential unless ``--show-secrets``: the report's target, the console's
first line, every reproduction, an error about the endpoint, and any answer that
echoes it say :data:`REDACTED` instead. A query parameter is a credential when its name is one a
header's would be (:func:`conformance.extra_headers.is_credential`: ``token``, ``key``,
``secret``, ``auth``, ``password``, ``session`` in it).

A report keeps no credential, so ``hookproof replay`` is given the URL again (``--url``) when its
target was redacted.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit

from conformance.extra_headers import is_credential

__all__ = ["REDACTED", "is_redacted", "shown_url", "url_credentials"]

REDACTED = "<redacted>"
"""What stands where a secret was, in every reproduction and report."""


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
    credential-like query parameters (what answers are scrubbed of)."""
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
