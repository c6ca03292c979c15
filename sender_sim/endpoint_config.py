"""An endpoint together with its secrets: what a worker needs to sign and address one attempt.

The store keeps an endpoint's metadata and a fingerprint of its secrets; the secrets themselves
live only in memory, in an :class:`EndpointConfig` held by the simulator.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import httpx

from receiver.redaction import SCRUBBED_LENGTH, url_credentials
from receiver.signing import Secret
from sender_sim.records import Endpoint

__all__ = ["EndpointConfig"]


@dataclass(frozen=True)
class EndpointConfig:
    """An endpoint with its secrets (kept in memory only)."""

    endpoint: Endpoint
    secrets: tuple[Secret, ...]

    @property
    def url(self) -> httpx.URL:
        """The endpoint's URL, parsed once."""
        return _parsed_url(self.endpoint.url)

    @property
    def url_secrets(self) -> tuple[str, ...]:
        """The URL's password and token values long enough to scrub from what it answers
        (:mod:`receiver.redaction`)."""
        return _url_secrets(self.endpoint.url)


@functools.lru_cache(maxsize=256)
def _parsed_url(url: str) -> httpx.URL:
    return httpx.URL(url)


@functools.lru_cache(maxsize=256)
def _url_secrets(url: str) -> tuple[str, ...]:
    return tuple(text for text in url_credentials(url) if len(text) >= SCRUBBED_LENGTH)
