"""The HTTP client a webhook sender delivers through: an ``httpx.AsyncClient`` without cookies.

A webhook sender never sends back what an endpoint set. Stripe, Svix and the Standard Webhooks
senders deliver every attempt without a ``Cookie`` header, whatever ``Set-Cookie`` an endpoint
answered; a framework that sets a session or CSRF cookie on every answer (Laravel, Rails,
Django behind some middleware) must see the same from hookproof, or a receiver would be judged
(and exercised) on requests no real sender makes. ``httpx`` keeps a cookie jar per client by
default; :func:`sender_client` gives it :class:`NoCookies` instead, which stores nothing and adds
nothing (a ``Cookie`` header given explicitly, e.g. by ``hookproof check --header``, is still
sent as given). Not parsing ``Set-Cookie`` also spares every answer a cookie-jar round through
``urllib`` and ``email.message``.

Unless a transport is given (an app in process, a scripted one), the client's transport has the
pool of :mod:`sender_sim.connection_pool`: httpcore's, whose bookkeeping at every request is
linear in its connections instead of quadratic, and whose check that an idle kept-alive
connection is still open costs one ``poll`` (:mod:`sender_sim.network_backend`) instead of
httpcore's rebuilding of the socket's attributes, on every connection of the pool.

Every client that sends deliveries is built here: the simulator's default client, the sender
commands' :func:`~sender_sim.commands.support.delivery_client`, and the conformance runner's.
"""

from __future__ import annotations

import http.cookiejar
from typing import Any

import httpx

from sender_sim.connection_pool import install

__all__ = ["NoCookies", "sender_client"]


class NoCookies(http.cookiejar.CookieJar):
    """A cookie jar that keeps nothing: no ``Set-Cookie`` is stored, no ``Cookie`` is added."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None

    def set_cookie(self, cookie: http.cookiejar.Cookie) -> None:
        return None

    def add_cookie_header(self, request: Any) -> None:
        return None


_TRANSPORT_OPTIONS = ("verify", "cert", "trust_env", "http1", "http2", "limits")
"""The ``httpx.AsyncClient`` options its default transport is built with (the client keeps them
too: a proxy taken from the environment builds its transport from them)."""


def sender_client(**options: Any) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient(**options)`` that never stores nor sends cookies."""
    if options.get("transport") is None:
        transport = httpx.AsyncHTTPTransport(
            **{name: options[name] for name in _TRANSPORT_OPTIONS if name in options}
        )
        install(transport)
        options["transport"] = transport
    return httpx.AsyncClient(cookies=NoCookies(), **options)
