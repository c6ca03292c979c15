"""Byte compatibility with the public ``standardwebhooks`` library, both directions.

The library reads the real clock inside ``verify``, so messages for it carry a timestamp near
the real now (within its fixed five-minute window); ours are verified at an injected ``now``.
"""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from receiver.exceptions import SignatureMismatch
from receiver.signing import Secret, StandardWebhooks, Verifier
from tests.receiver.test_signing import STANDARD_VECTORS

keys = st.binary(min_size=1, max_size=64)
event_ids = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=64)
bodies = st.text()  # the library verifies text, so bodies are UTF-8 here
offsets = st.integers(-240, 240)


def whsec(key: bytes) -> str:
    return "whsec_" + base64.b64encode(key).decode()


@pytest.mark.parametrize(("secret", "event_id", "timestamp", "body", "signature"), STANDARD_VECTORS)
def test_the_library_produces_the_same_vectors(
    secret: str, event_id: str, timestamp: int, body: bytes, signature: str
) -> None:
    moment = datetime.fromtimestamp(timestamp, UTC)
    assert Webhook(secret).sign(event_id, moment, body.decode()) == signature


@given(key=keys, event_id=event_ids, body=bodies, offset=offsets)
def test_library_signed_messages_verify_with_ours(
    key: bytes, event_id: str, body: str, offset: int
) -> None:
    timestamp = 1_700_000_000 + offset
    signature = Webhook(whsec(key)).sign(event_id, datetime.fromtimestamp(timestamp, UTC), body)
    headers = {
        "Webhook-Id": event_id,
        "Webhook-Timestamp": str(timestamp),
        "Webhook-Signature": signature,
    }
    message = Verifier([Secret(whsec(key))]).verify(body.encode(), headers, now=1_700_000_000)
    assert (message.event_id, message.body) == (event_id, body.encode())


@given(keys=st.lists(keys, min_size=1, max_size=3), event_id=event_ids, body=bodies,
       offset=offsets)  # fmt: skip
def test_messages_we_sign_verify_with_the_library(
    keys: list[bytes], event_id: str, body: str, offset: int
) -> None:
    timestamp = int(time.time()) + offset
    headers = StandardWebhooks().sign(
        body.encode(),
        secrets=[Secret(whsec(key)) for key in keys],
        event_id=event_id,
        timestamp=timestamp,
    )
    for key in keys:  # a receiver holding any one of the sender's active secrets accepts it
        Webhook(whsec(key)).verify(body.encode(), headers, json_parse=False)


@given(key=keys, other=keys, event_id=event_ids, body=bodies)
def test_both_refuse_the_same_wrong_secret(
    key: bytes, other: bytes, event_id: str, body: str
) -> None:
    assume(key != other)
    now = int(time.time())
    headers = StandardWebhooks().sign(
        body.encode(), secrets=[Secret(whsec(key))], event_id=event_id, timestamp=now
    )
    with pytest.raises(WebhookVerificationError):
        Webhook(whsec(other)).verify(body.encode(), headers, json_parse=False)
    with pytest.raises(SignatureMismatch):
        Verifier([Secret(whsec(other))]).verify(body.encode(), headers, now=now)


@given(key=keys, event_id=event_ids, body=bodies)
def test_secrets_without_base64_padding_work_as_in_the_library(
    key: bytes, event_id: str, body: str
) -> None:
    unpadded = whsec(key).rstrip("=")
    now = int(time.time())
    headers = Verifier([Secret(unpadded)]).sign(body.encode(), event_id=event_id, timestamp=now)
    Webhook(unpadded).verify(body.encode(), headers, json_parse=False)
    Verifier([Secret(whsec(key))]).verify(body.encode(), headers, now=now)
