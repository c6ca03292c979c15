"""Receivers built the way the public libraries' documentation shows: ``standardwebhooks`` and
``svix`` (Standard Webhooks), ``stripe`` (Stripe-style) and GitHub's documented HMAC check.

Each is a verification function plugged into :func:`~tests.conformance.broken_receivers.
plain_receiver` (the same durable inbox and probe), refusing with 400 — or 403 for GitHub — as
the samples do. :data:`CORRECT` builds them right; :data:`LIBRARY_BUGS` are the ways the samples,
copied to the letter, break a guarantee, and :data:`LIBRARY_MUST_FAIL` the scenarios that catch
each.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Mapping, Sequence

import standardwebhooks
import stripe
import svix.webhooks
from starlette.responses import JSONResponse, Response

from tests.conformance.broken_receivers import Verify

__all__ = ["CORRECT", "LIBRARY_BUGS", "LIBRARY_MUST_FAIL", "library_verify"]

Refusal = tuple[str, Response | None]


def _refuse(event_id: str, status: int = 400) -> Refusal:
    body = {"type": "https://example.test/problems/verification-failed", "status": status}
    return event_id, JSONResponse(body, status_code=status, media_type="application/problem+json")


def _valid_id(event_id: object) -> bool:
    return (
        isinstance(event_id, str)
        and 0 < len(event_id) <= 255
        and event_id.isascii()
        and event_id.isprintable()
        and " " not in event_id
    )


def _standard(
    make: Callable[[str], object], errors: tuple[type[Exception], ...]
) -> Callable[[Sequence[str], bool], Verify]:
    def build(secrets: Sequence[str], narrow: bool) -> Verify:
        hooks = [make(secret) for secret in secrets]
        caught = errors[:1] if narrow else errors

        def verify(headers: Mapping[str, str], body: bytes) -> Refusal:
            event_id = headers.get("webhook-id", "")
            for hook in hooks:
                try:
                    # the request's headers as they are, as the READMEs show: for a repeated
                    # name the library keeps the last value, headers.get() the first
                    hook.verify(body, headers)  # type: ignore[attr-defined]
                except caught:
                    continue
                if not _valid_id(event_id):
                    return _refuse(event_id)
                return event_id, None
            return _refuse(event_id)

        return verify

    return build


_SVIX_HEADERS = ("svix-id", "svix-timestamp", "svix-signature")


def _svix_branded(secrets: Sequence[str], narrow: bool) -> Verify:
    """Svix's manual-verification docs (and Clerk's, Resend's): the three ``svix-`` headers read
    one by one, 400 when one is missing, then ``Webhook(secret).verify`` over exactly them."""
    hooks = [svix.webhooks.Webhook(secret) for secret in secrets]
    caught = (
        (svix.webhooks.WebhookVerificationError,)
        if narrow
        else (
            svix.webhooks.WebhookVerificationError,
            ValueError,
        )
    )

    def verify(headers: Mapping[str, str], body: bytes) -> Refusal:
        svix_id, timestamp, signature = (headers.get(name) for name in _SVIX_HEADERS)
        if not (svix_id and timestamp and signature):
            return _refuse(svix_id or "")
        given = dict(zip(_SVIX_HEADERS, (svix_id, timestamp, signature), strict=True))
        for hook in hooks:
            try:
                hook.verify(body, given)
            except caught:
                continue
            if not _valid_id(svix_id):
                return _refuse(svix_id)
            return svix_id, None
        return _refuse(svix_id)

    return verify


def _stripe(secrets: Sequence[str], narrow: bool) -> Verify:
    def verify(headers: Mapping[str, str], body: bytes) -> Refusal:
        for secret in secrets:
            try:
                event = stripe.Webhook.construct_event(
                    body, headers.get("stripe-signature"), secret
                )
            except ValueError:  # invalid payload (the sample's first except)
                return _refuse("")
            except stripe.SignatureVerificationError:  # invalid signature
                continue
            event_id = event.to_dict().get("id")
            if not _valid_id(event_id):
                return _refuse("")
            return str(event_id), None
        return _refuse("")

    return verify


def _github_with(header: str, algorithm: str) -> Callable[[Sequence[str], bool], Verify]:
    """GitHub's documented check of ``header`` (``sha256``: ``X-Hub-Signature-256``, today's
    recipe; ``sha1``: ``X-Hub-Signature``, the older one GitHub still serves by sending both):
    ``hmac.compare_digest(expected, signature_header)``, 403. ``narrow``: on the header's
    *text*, as the sample does (a non-ASCII header raises)."""

    def build(secrets: Sequence[str], narrow: bool) -> Verify:
        def verify(headers: Mapping[str, str], body: bytes) -> Refusal:
            event_id = headers.get("x-github-delivery", "")
            signature = headers.get(header)
            if not signature or not event_id:
                return _refuse(event_id)
            if not _valid_id(event_id):
                return _refuse(event_id)
            for secret in secrets:
                digest = hmac.new(secret.encode("utf-8"), msg=body, digestmod=algorithm)
                expected = f"{algorithm}=" + digest.hexdigest()
                if narrow:
                    matched = hmac.compare_digest(expected, signature)  # TypeError on non-ASCII
                else:
                    matched = hmac.compare_digest(expected.encode(), signature.encode("latin-1"))
                if matched:
                    try:
                        json.loads(body)
                    except ValueError:
                        return _refuse(event_id)
                    return event_id, None
            return _refuse(event_id, 403)

        return verify

    return build


LIBRARIES: Mapping[str, tuple[str, Callable[[Sequence[str], bool], Verify]]] = {
    "standardwebhooks": (
        "standard",
        _standard(
            standardwebhooks.Webhook, (standardwebhooks.WebhookVerificationError, ValueError)
        ),
    ),
    "svix": (
        "standard",
        _standard(svix.webhooks.Webhook, (svix.webhooks.WebhookVerificationError, ValueError)),
    ),
    "svix_manual": ("svix", _svix_branded),
    "stripe": ("stripe", _stripe),
    "github": ("github", _github_with("x-hub-signature-256", "sha256")),
    "github_sha1": ("github", _github_with("x-hub-signature", "sha1")),
}
"""Each library: the scheme it verifies and how to build its verification (``narrow``: the
sample's ``except`` to the letter)."""

CORRECT = tuple(LIBRARIES)

LIBRARY_BUGS: Mapping[str, str] = {
    "svix-narrow-except": "svix's sample catches only WebhookVerificationError; the library "
    "raises ValueError on 'v1' without a comma and UnicodeDecodeError on a non-UTF-8 body",
    "standardwebhooks-narrow-except": "the same sample with the standardwebhooks package",
    "github-str-compare": "GitHub's sample compares the header's text: hmac.compare_digest "
    "raises TypeError on a non-ASCII header",
}
LIBRARY_MUST_FAIL: Mapping[str, frozenset[str]] = {
    "svix-narrow-except": frozenset({"signature.malformed-headers", "signature.body-not-utf8"}),
    "standardwebhooks-narrow-except": frozenset(
        {"signature.malformed-headers", "signature.body-not-utf8"}
    ),
    "github-str-compare": frozenset({"signature.malformed-headers"}),
}


def library_verify(name: str, secrets: Sequence[str]) -> tuple[str, Verify]:
    """The scheme and verification of a library receiver (``name`` from :data:`CORRECT` or
    :data:`LIBRARY_BUGS`)."""
    library = name.split("-", 1)[0]
    scheme, build = LIBRARIES[library]
    return scheme, build(secrets, name in LIBRARY_BUGS)
