"""What a webhook endpoint's URL must be: the one rule every command, config and store applies.

A sender addresses an endpoint with an absolute ``http://`` or ``https://`` URL that names a host
and, if it names a port, one that exists (1–65535). Anything else is refused where it is given (a
flag, a config key, a report's target, an endpoint's settings), in words, before any connection is
tried: ``http://host:99999/`` used to reach the socket layer and end the run with a traceback.
"""

from __future__ import annotations

import httpx

__all__ = ["url_problem"]

_SCHEMES = frozenset({"http", "https"})
_MAX_PORT = 65535


def url_problem(url: object) -> str | None:
    """Why ``url`` cannot address a webhook endpoint, in a few words, or ``None`` when it can."""
    if not isinstance(url, str) or not url:
        return "a URL is required"
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as error:
        return f"it is not a valid URL ({error})"
    if parsed.scheme not in _SCHEMES:
        return "it must start with http:// or https://"
    if not parsed.host:
        return "it names no host"
    port = parsed.port
    if port is not None and not 1 <= port <= _MAX_PORT:
        return f"port {port} does not exist (1-{_MAX_PORT})"
    return None
