"""RFC 9457 problem details: the one shape of every error answer the receiver sends.

Every refusal is ``application/problem+json`` with a stable ``type`` URI
(``https://hookproof.dev/problems/<slug>``), a ``title``, the ``status`` and a ``detail`` that never
holds a secret or an expected signature (the exception messages of :mod:`receiver.exceptions` are
written that way; nothing here adds request data except the event id). Retryable answers carry
``Retry-After`` in whole seconds.

The slugs are data: :data:`PROBLEMS` names every answer the middleware and the probe can give that
is not a :class:`~receiver.exceptions.VerificationError` (those bring their own slug and status).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from starlette.types import Send

from receiver.exceptions import VerificationError

__all__ = [
    "PROBLEMS",
    "PROBLEM_BASE",
    "PROBLEM_CONTENT_TYPE",
    "Problem",
    "media_type",
    "problem_body",
    "problem_for",
    "send_json",
    "send_problem",
]

PROBLEM_BASE = "https://hookproof.dev/problems/"
PROBLEM_CONTENT_TYPE = "application/problem+json"


def media_type(content_type: str) -> str:
    """The media type of a ``Content-Type`` value, lower-case, without its parameters
    (``Application/JSON; charset=utf-8`` is ``application/json``)."""
    return content_type.split(";", 1)[0].strip().lower()


@dataclass(frozen=True)
class Problem:
    """One kind of refusal: its slug (the ``type`` URI's last segment), status and title."""

    slug: str
    status: int
    title: str

    @property
    def type_uri(self) -> str:
        return PROBLEM_BASE + self.slug


PROBLEMS: Mapping[str, Problem] = {
    problem.slug: problem
    for problem in (
        Problem("body-too-large", 413, "The webhook body is larger than the configured limit"),
        Problem("invalid-content-length", 400, "The Content-Length header is not a number"),
        Problem("delivery-in-flight", 503, "Another copy of this event is being handled"),
        Problem("inbox-unavailable", 503, "The inbox cannot record the event right now"),
        Problem("handler-failed", 503, "The webhook handler failed; retry later"),
        Problem("claim-lost", 503, "The claim on this event expired before it was committed"),
        Problem("already-answered", 409, "This event was already answered"),
        Problem("probe-unauthorized", 401, "A valid probe bearer token is required"),
        Problem("event-not-found", 404, "The inbox holds no record of this event"),
        Problem("event-id-required", 404, "The probe path needs an event id"),
        Problem("method-not-allowed", 405, "This method is not accepted here"),
        Problem("not-found", 404, "Nothing is served at this path"),
        Problem(
            "ambiguous-header", 400, "A webhook header field appears twice with different values"
        ),
        Problem("body-timeout", 408, "The body did not arrive within the read deadline"),
        Problem("headers-too-large", 431, "The request headers are larger than the limit"),
        Problem("malformed-request", 400, "The request is not valid HTTP/1.1"),
    )
}
"""Every non-verification problem, by slug."""


def problem_for(error: VerificationError) -> Problem:
    """The problem a verification failure is answered with."""
    return Problem(error.problem_type, error.status, error.title)


def problem_body(
    problem: Problem, detail: str, *, status: int | None = None, **extra: object
) -> bytes:
    """The JSON document of one problem (``status`` overrides the problem's default)."""
    document: dict[str, object] = {
        "type": problem.type_uri,
        "title": problem.title,
        "status": problem.status if status is None else status,
        "detail": detail,
    }
    document.update(extra)
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


async def send_json(
    send: Send,
    status: int,
    body: bytes,
    *,
    content_type: str = "application/json",
    headers: Mapping[str, str] | None = None,
) -> None:
    """Send a complete response with a JSON body straight to an ASGI ``send``."""
    raw_headers = [
        (b"content-type", content_type.encode("latin-1")),
        (b"content-length", str(len(body)).encode("latin-1")),
    ]
    for name, value in (headers or {}).items():
        raw_headers.append((name.lower().encode("latin-1"), value.encode("latin-1")))
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_problem(
    send: Send,
    problem: Problem,
    detail: str,
    *,
    status: int | None = None,
    retry_after: int | None = None,
    headers: Mapping[str, str] | None = None,
    **extra: object,
) -> None:
    """Answer with ``problem`` (and ``Retry-After`` when given, and any further ``headers``) as
    ``application/problem+json``."""
    if retry_after is not None:
        headers = {**(headers or {}), "retry-after": str(retry_after)}
    body = problem_body(problem, detail, status=status, **extra)
    await send_json(
        send,
        problem.status if status is None else status,
        body,
        content_type=PROBLEM_CONTENT_TYPE,
        headers=headers,
    )
