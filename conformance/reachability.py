"""Waiting for the endpoint: before any scenario, the endpoint must answer at all.

Connection refused, read timeouts and 503 are retried until ``within`` seconds have passed (the
endpoint may still be starting, e.g. in a CI job that launched it a moment ago); any other answer,
even 404 or 405, means someone is listening. Each try has a total deadline (a server that drips
its answer cannot stretch it). Not answering is :class:`EndpointUnreachable`, and its message says
"never answered" only when nothing answered at all (an endpoint that answered only 503, or
started an answer it never finished, is named as such). A TLS failure (a certificate that cannot
be verified, an ``https://`` URL on a plain-HTTP port) is not waited out: it is said at once, with
what to do about it.
"""

from __future__ import annotations

import asyncio
import time

import httpx

from conformance import receiver_clock
from conformance.deadline import request_within
from conformance.exceptions import DeadlineExceeded, EndpointUnreachable
from receiver.redaction import shown_url
from sender_sim.wire import tls_failure

__all__ = ["wait_until_answering"]


async def wait_until_answering(
    client: httpx.AsyncClient, url: str, *, within: float, answer_within: float
) -> float | None:
    """Return once ``url`` answers something other than 503, with how far the endpoint's clock
    is ahead of ours by that answer's ``Date`` (:mod:`conformance.receiver_clock`; ``None``
    without one); raise if it never answers."""
    deadline = time.monotonic() + within
    shown = shown_url(url)  # what an error says: never the URL's credentials
    delay = 0.05
    while True:
        try:
            response = await request_within(client, "GET", url, within_s=answer_within)
        except DeadlineExceeded as late:
            answered = late.status is not None
            why = late.describe()
        except (httpx.ConnectError, httpx.RemoteProtocolError) as error:
            tls = tls_failure(error)
            if tls is not None:  # a certificate does not become valid by waiting
                raise EndpointUnreachable(f"the endpoint {shown} cannot be used: {tls}") from None
            answered, why = False, error.__class__.__name__
        except httpx.HTTPError as error:
            raise EndpointUnreachable(
                f"the endpoint {shown} never answered ({error.__class__.__name__})"
            ) from None
        else:
            if response.status_code != 503:
                return receiver_clock.offset_from_date(
                    response.headers.get("date"), receiver_clock.local_now()
                )
            answered, why = True, "503 Service Unavailable"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            waited = f" within {within:g} s" if within else ""
            said = "did not answer usably" if answered else "never answered"
            raise EndpointUnreachable(f"the endpoint {shown} {said}{waited} ({why})")
        await asyncio.sleep(min(delay, remaining))  # real-time: the endpoint is still starting
        delay = min(delay * 2, 0.5)
