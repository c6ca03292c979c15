"""The wire scheme: known vectors, tolerance boundaries, strict parsing, rotation, round trips,
and a fuzz that nothing but the package's own errors ever escapes verification."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import time
import types
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import receiver.schemes.base
import receiver.schemes.standard
from receiver.exceptions import (
    ConfigurationError,
    InvalidPayload,
    MalformedHeader,
    MissingHeader,
    SignatureMismatch,
    TimestampTooNew,
    TimestampTooOld,
    VerificationError,
)
from receiver.signing import (
    DEFAULT_TOLERANCE_S,
    GitHubStyle,
    Scheme,
    Secret,
    StandardWebhooks,
    StripeStyle,
    VerifiedMessage,
    Verifier,
    scheme_named,
)

STANDARD = StandardWebhooks()
STRIPE = StripeStyle()
GITHUB = GitHubStyle()
NOW = 1_700_000_000
STRIPE_SECRET = "whsec_stripe_style_signing_secret"

# -- known vectors --------------------------------------------------------------------------------

STANDARD_VECTORS = [
    (
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        1614265330,
        b'{"test": 2432232314}',
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    ),
    (
        "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
        "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
        1649367553,
        b'{"email":"test@example.com","username":"test_user"}',
        "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=",
    ),
]


@pytest.mark.parametrize(("secret", "event_id", "timestamp", "body", "signature"), STANDARD_VECTORS)
def test_standard_webhooks_vectors(
    secret: str, event_id: str, timestamp: int, body: bytes, signature: str
) -> None:
    verifier = Verifier([Secret(secret)])
    headers = {
        "webhook-id": event_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature,
    }
    assert verifier.verify(body, headers, now=timestamp) == VerifiedMessage(
        event_id, body, "standard", timestamp, 0
    )
    assert verifier.sign(body, event_id=event_id, timestamp=timestamp) == headers
    with pytest.raises(SignatureMismatch):
        verifier.verify(body + b" ", headers, now=timestamp)


def test_github_vector() -> None:
    verifier = Verifier([Secret("It's a Secret to Everybody")], scheme=GITHUB)
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    headers = verifier.sign(b"Hello, World!", event_id="delivery-1", timestamp=0)
    legacy = hmac.new(b"It's a Secret to Everybody", b"Hello, World!", hashlib.sha1).hexdigest()
    assert headers == {  # GitHub sends the SHA-1 header too, "for existing integrations"
        "x-hub-signature-256": expected,
        "x-hub-signature": f"sha1={legacy}",
        "x-github-delivery": "delivery-1",
    }
    message = verifier.verify(
        b"Hello, World!", {"X-Hub-Signature-256": expected, "X-GitHub-Delivery": "delivery-1"}
    )
    assert (message.event_id, message.timestamp, message.scheme) == ("delivery-1", None, "github")


def test_stripe_style_matches_an_independent_computation() -> None:
    body = b'{"id": "evt_1", "object": "event"}'
    digest = hmac.new(STRIPE_SECRET.encode(), b"%d.%s" % (NOW, body), hashlib.sha256).hexdigest()
    verifier = Verifier([Secret(STRIPE_SECRET)], scheme=STRIPE)
    header = f"t={NOW},v1={digest}"
    assert verifier.sign(body, event_id="evt_1", timestamp=NOW) == {"stripe-signature": header}
    message = verifier.verify(body, {"Stripe-Signature": f"t={NOW},v0=abc,v1={digest}"}, now=NOW)
    assert (message.event_id, message.timestamp) == ("evt_1", NOW)


def test_a_verified_message_is_immutable_named_and_keeps_the_parse_out_of_its_repr() -> None:
    body = stripe_body("evt_repr")
    verifier = Verifier([Secret(STRIPE_SECRET)], scheme=STRIPE)
    message = verifier.verify(body, verifier.sign(body, event_id="", timestamp=NOW), now=NOW)
    assert (message.event_id, message.body, message.scheme) == ("evt_repr", body, "stripe")
    assert (message.timestamp, message.secret_index) == (NOW, 0)
    assert message.payload is not None
    assert message.json() == json.loads(body)
    with pytest.raises(AttributeError):
        message.event_id = "evt_other"  # type: ignore[misc]
    assert "payload" not in repr(message)
    assert hash(message) == hash(message._replace(payload=None))  # the parse holds a dict
    assert repr(message).startswith("VerifiedMessage(")
    standard = Verifier([standard_secret()])
    headers = standard.sign(b"{}", event_id="msg_1", timestamp=NOW)
    plain = standard.verify(b"{}", headers, now=NOW)
    assert plain == VerifiedMessage("msg_1", b"{}", "standard", NOW, 0)
    assert plain.payload is None
    assert plain.json() == {}
    assert plain._replace(secret_index=1).secret_index == 1  # a copy; the original is unchanged
    assert plain.secret_index == 0


# -- helpers --------------------------------------------------------------------------------------


def standard_secret(key: bytes = b"0123456789abcdef0123456789abcdef") -> Secret:
    return Secret("whsec_" + base64.b64encode(key).decode())


def stripe_body(event_id: str = "evt_1") -> bytes:
    return json.dumps({"id": event_id, "type": "invoice.paid"}).encode()


def signed(
    scheme: Scheme,
    timestamp: int = NOW,
    body: bytes | None = None,
    secrets: list[Secret] | None = None,
) -> tuple[Verifier, bytes, dict[str, str]]:
    secrets = secrets or [standard_secret() if scheme is STANDARD else Secret(STRIPE_SECRET)]
    body = stripe_body() if body is None else body
    verifier = Verifier(secrets, scheme=scheme)
    return verifier, body, verifier.sign(body, event_id="evt_1", timestamp=timestamp)


# -- tolerance ------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", [STANDARD, STRIPE], ids=["standard", "stripe"])
@pytest.mark.parametrize(
    ("offset", "error"),
    [
        (-DEFAULT_TOLERANCE_S, None),
        (DEFAULT_TOLERANCE_S, None),
        (0, None),
        (-DEFAULT_TOLERANCE_S - 1, TimestampTooOld),
        (DEFAULT_TOLERANCE_S + 1, TimestampTooNew),
        (-(10**6), TimestampTooOld),
        (10**6, TimestampTooNew),
    ],
)
@pytest.mark.parametrize("fraction", [0.0, 0.999999])
def test_tolerance_boundaries(
    scheme: Scheme, offset: int, error: type[VerificationError] | None, fraction: float
) -> None:
    verifier, body, headers = signed(scheme, timestamp=NOW + offset)
    now = NOW + fraction  # the clock's fraction of a second never moves the window
    if error is None:
        assert verifier.verify(body, headers, now=now).timestamp == NOW + offset
    else:
        with pytest.raises(error, match=r"(past|future)") as caught:
            verifier.verify(body, headers, now=now)
        assert caught.value.status == 401
        assert caught.value.problem_type == "timestamp-outside-tolerance"


@pytest.mark.parametrize(("offset", "accepted"), [(0, True), (1, False), (-1, False)])
def test_a_zero_tolerance_accepts_only_the_same_second(offset: int, accepted: bool) -> None:
    secret = standard_secret()
    headers = Verifier([secret]).sign(b"{}", event_id="e", timestamp=NOW + offset)
    verifier = Verifier([secret], tolerance=0)
    if accepted:
        verifier.verify(b"{}", headers, now=NOW)
    else:
        with pytest.raises((TimestampTooOld, TimestampTooNew)):
            verifier.verify(b"{}", headers, now=NOW)


def test_the_clock_is_read_at_each_call() -> None:
    moments = [float(NOW), float(NOW + DEFAULT_TOLERANCE_S + 1)]
    verifier, body, headers = signed(STANDARD)
    clocked = Verifier(verifier.secrets, clock=lambda: moments.pop(0))
    clocked.verify(body, headers)
    with pytest.raises(TimestampTooOld):
        clocked.verify(body, headers)


def test_the_default_clock_is_the_real_time() -> None:
    verifier, body, _ = signed(STANDARD)
    fresh = verifier.sign(body, event_id="evt_1", timestamp=int(time.time()))
    verifier.verify(body, fresh)
    stale = verifier.sign(body, event_id="evt_1", timestamp=int(time.time()) - 3600)
    with pytest.raises(TimestampTooOld):
        verifier.verify(body, stale)


# -- strict parsing -------------------------------------------------------------------------------

BAD_TIMESTAMPS = [
    f"{NOW}.0", f"+{NOW}", f" {NOW}", f"{NOW} ", f"{NOW:_}", f"-{NOW}", "1.7e9", "", "0x6553F100",
    "１７００００００００", "١٧٠٠٠٠٠٠٠٠", "9" * 13, "now", f"{NOW}\n",
]  # fmt: skip


@pytest.mark.parametrize("raw", BAD_TIMESTAMPS)
def test_standard_timestamps_are_strict_integers(raw: str) -> None:
    verifier, body, headers = signed(STANDARD)
    with pytest.raises(MalformedHeader, match="integer Unix seconds") as caught:
        verifier.verify(body, {**headers, "webhook-timestamp": raw}, now=NOW)
    assert caught.value.status == 400


@pytest.mark.parametrize("raw", BAD_TIMESTAMPS)
def test_stripe_timestamps_are_strict_integers(raw: str) -> None:
    verifier, body, headers = signed(STRIPE)
    header = headers["stripe-signature"].replace(f"t={NOW}", f"t={raw}")
    with pytest.raises(MalformedHeader):
        verifier.verify(body, {"stripe-signature": header}, now=NOW)


@pytest.mark.parametrize(
    ("scheme", "header"),
    [
        (STANDARD, "webhook-id"),
        (STANDARD, "webhook-timestamp"),
        (STANDARD, "webhook-signature"),
        (STRIPE, "stripe-signature"),
        (GITHUB, "x-hub-signature-256"),
        (GITHUB, "x-github-delivery"),
    ],
)
def test_each_missing_header_is_named(scheme: Scheme, header: str) -> None:
    verifier, body, headers = signed(scheme)
    del headers[header]
    with pytest.raises(MissingHeader, match=header) as caught:
        verifier.verify(body, headers, now=NOW)
    assert caught.value.status == 400


@pytest.mark.parametrize(
    ("signature", "error"),
    [
        ("", MalformedHeader),
        ("   ", MalformedHeader),
        ("v1", MalformedHeader),
        ("v1,", MalformedHeader),
        (",abc", MalformedHeader),
        ("v1,not base64!", SignatureMismatch),
        ("v1,QUJD=", SignatureMismatch),
        ("v1,é", SignatureMismatch),
        ("v2,QUJD v1a,QUJD", SignatureMismatch),
        ("v1," + "A" * 5000, MalformedHeader),
        ("v1," + "A" * 43 + "!", SignatureMismatch),
        ("v1," + "A" * 44, SignatureMismatch),
        ("v2," + "A" * 44, SignatureMismatch),
        (" v1," + "A" * 43, SignatureMismatch),
    ],
)
def test_malformed_standard_signatures(signature: str, error: type[VerificationError]) -> None:
    verifier, body, headers = signed(STANDARD)
    with pytest.raises(error):
        verifier.verify(body, {**headers, "webhook-signature": signature}, now=NOW)


@pytest.mark.parametrize("event_id", ["", " ", "a b", "é", "x" * 256, "tab\tid", "new\nline"])
def test_bad_event_ids_are_malformed(event_id: str) -> None:
    verifier, body, headers = signed(STANDARD)
    with pytest.raises(MalformedHeader):
        verifier.verify(body, {**headers, "webhook-id": event_id}, now=NOW)


@pytest.mark.parametrize(
    "header",
    [
        "sha1=" + "0" * 40,
        "sha256=" + "g" * 64,
        "sha256=" + "0" * 63,
        "sha256",
        "",
        "SHA256=" + "0" * 64,
    ],
)
def test_malformed_github_signatures(header: str) -> None:
    verifier, body, headers = signed(GITHUB, body=b"payload")
    with pytest.raises(MalformedHeader):
        verifier.verify(body, {**headers, "x-hub-signature-256": header})


@pytest.mark.parametrize(
    "header", ["", "v1=abc", f"t={NOW},t={NOW}", "t", ",,,", f"t={NOW}" + ",v1=00" * 1000]
)
def test_malformed_stripe_headers(header: str) -> None:
    verifier, body, _ = signed(STRIPE)
    with pytest.raises(MalformedHeader):
        verifier.verify(body, {"stripe-signature": header}, now=NOW)


# -- bodies ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [b"", b"\xff\xfe not utf-8", b"not json", b"[1, 2]", b'{"id": 7}', b'{"id": ""}',
     b"{\"id\": " + b"1" * 5000 + b"}", b"[" * 100_000, b'{"no_id": true}'],
)  # fmt: skip
def test_stripe_bodies_without_a_usable_id_are_invalid_payloads(body: bytes) -> None:
    verifier, _, headers = signed(STRIPE, body=body)
    with pytest.raises(InvalidPayload) as caught:
        verifier.verify(body, headers, now=NOW)
    assert caught.value.status == 400


@pytest.mark.parametrize(
    ("body", "message"),
    [(b"", "empty"), (b"\xc3\x28", "UTF-8"), (b"{", "JSON"), (b"1" * 5000, "JSON")],
)
def test_verified_raw_bytes_parse_only_into_invalid_payload(body: bytes, message: str) -> None:
    verifier, _, headers = signed(STANDARD, body=body)
    verified = verifier.verify(body, headers, now=NOW)
    assert verified.body == body  # raw bytes are signed and kept, never re-serialised
    with pytest.raises(InvalidPayload, match=message):
        verified.json()


def test_unusual_but_valid_json_bytes_verify_as_sent() -> None:
    body = b'{ "type" : "a\\u00e9\\/b",\n\t"data":{"n":1.0E+2}  }'
    verifier, _, headers = signed(STANDARD, body=body)
    assert verifier.verify(body, headers, now=NOW).json() == {"type": "aé/b", "data": {"n": 100.0}}
    with pytest.raises(SignatureMismatch):
        verifier.verify(json.dumps(json.loads(body)).encode(), headers, now=NOW)


# -- rotation and versions ------------------------------------------------------------------------


def test_several_active_secrets_any_one_verifies() -> None:
    old, new = standard_secret(b"old" * 8), standard_secret(b"new" * 8)
    headers = Verifier([new]).sign(b"{}", event_id="e", timestamp=NOW)
    assert Verifier([old, new]).verify(b"{}", headers, now=NOW).secret_index == 1
    with pytest.raises(SignatureMismatch):
        Verifier([old]).verify(b"{}", headers, now=NOW)


def test_a_sender_with_two_secrets_signs_twice_and_unknown_versions_are_ignored() -> None:
    old, new = standard_secret(b"old" * 8), standard_secret(b"new" * 8)
    headers = Verifier([old, new]).sign(b"{}", event_id="e", timestamp=NOW)
    entries = headers["webhook-signature"].split(" ")
    assert len(entries) == 2
    mixed = {**headers, "webhook-signature": f"v2,AAAA v1a,BBBB {entries[1]}"}
    assert Verifier([new]).verify(b"{}", mixed, now=NOW).secret_index == 0


@pytest.mark.parametrize("scheme", [STRIPE, GITHUB], ids=["stripe", "github"])
def test_rotation_for_raw_key_schemes(scheme: Scheme) -> None:
    old, new = Secret("old-secret"), Secret("new-secret")
    body = stripe_body()
    headers = Verifier([new], scheme=scheme).sign(body, event_id="evt_1", timestamp=NOW)
    assert Verifier([old, new], scheme=scheme).verify(body, headers, now=NOW).secret_index == 1


def test_comparison_is_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(receiver.schemes.base, "compare", spy)
    monkeypatch.setattr(receiver.schemes.standard, "_compare", spy)
    for scheme in (STANDARD, STRIPE, GITHUB):
        verifier, body, headers = signed(scheme)
        verifier.verify(body, headers, now=NOW)
    assert len(calls) == 3


# -- configuration and secrecy --------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: Verifier([]),
        lambda: Verifier([Secret("whsec_not*base64")]),
        lambda: Verifier([Secret("whsec_")]),
        lambda: Verifier([standard_secret()], tolerance=-1),
        lambda: Verifier([standard_secret()], tolerance=True),
        lambda: Verifier([standard_secret()], tolerance=1.5),  # type: ignore[arg-type]
        lambda: Secret(""),
        lambda: Secret("   "),
        lambda: scheme_named("hmac-sha1"),
    ],
)
def test_bad_configuration_is_a_configuration_error(make: Callable[[], Any]) -> None:
    with pytest.raises(ConfigurationError):
        make()


def test_scheme_named() -> None:
    assert [scheme_named(n).name for n in ("standard", "stripe", "github")] == [
        "standard", "stripe", "github"
    ]  # fmt: skip


def test_errors_and_reprs_never_show_a_secret_or_the_expected_signature() -> None:
    secret = standard_secret(b"super-secret-key-material")
    verifier = Verifier([secret])
    good = verifier.sign(b"{}", event_id="e", timestamp=NOW)
    expected = good["webhook-signature"].removeprefix("v1,")
    with pytest.raises(SignatureMismatch) as caught:
        verifier.verify(b"{}!", good, now=NOW)
    for text in (str(caught.value), repr(caught.value), repr(secret), repr(verifier)):
        assert secret.value not in text
        assert expected not in text
        assert "super-secret" not in text


# -- properties -----------------------------------------------------------------------------------

event_ids = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=64)
keys = st.binary(min_size=1, max_size=64)
timestamps = st.integers(0, 10**11)
offsets = st.integers(-DEFAULT_TOLERANCE_S, DEFAULT_TOLERANCE_S)


@given(keys=st.lists(keys, min_size=1, max_size=3), event_id=event_ids, body=st.binary(),
       timestamp=timestamps, offset=offsets, signer=st.integers(0, 2))  # fmt: skip
def test_standard_round_trip(
    keys: list[bytes], event_id: str, body: bytes, timestamp: int, offset: int, signer: int
) -> None:
    secrets = [standard_secret(key) for key in keys]
    signer = min(signer, len(secrets) - 1)
    headers = Verifier([secrets[signer]]).sign(body, event_id=event_id, timestamp=timestamp)
    message = Verifier(secrets).verify(body, headers, now=timestamp + offset)
    assert (message.event_id, message.body, message.timestamp) == (event_id, body, timestamp)
    assert keys[message.secret_index] == keys[signer]


@given(secret=st.text(min_size=1).filter(str.strip), event_id=event_ids, extra=st.text(),
       timestamp=timestamps, offset=offsets)  # fmt: skip
def test_stripe_round_trip(
    secret: str, event_id: str, extra: str, timestamp: int, offset: int
) -> None:
    body = json.dumps({"id": event_id, "extra": extra}, ensure_ascii=False).encode()
    verifier = Verifier([Secret(secret)], scheme=STRIPE)
    headers = verifier.sign(body, event_id=event_id, timestamp=timestamp)
    message = verifier.verify(body, headers, now=timestamp + offset)
    assert (message.event_id, message.timestamp) == (event_id, timestamp)


@given(secret=st.text(min_size=1).filter(str.strip), event_id=event_ids, body=st.binary())
def test_github_round_trip(secret: str, event_id: str, body: bytes) -> None:
    verifier = Verifier([Secret(secret)], scheme=GITHUB)
    headers = verifier.sign(body, event_id=event_id, timestamp=0)
    assert verifier.verify(body, headers, now=0).event_id == event_id


HEADER_NAMES = ["webhook-id", "webhook-timestamp", "webhook-signature", "stripe-signature",
                "x-hub-signature-256", "x-github-delivery", "Webhook-Signature"]  # fmt: skip
header_values = st.one_of(
    st.text(),
    st.text(st.characters(max_codepoint=255)),
    st.from_regex(r"\A(v1,[A-Za-z0-9+/=]{0,50} ?){1,3}\Z"),
    st.from_regex(r"\At=[0-9+.\- ]{0,12}(,v1=[0-9a-f]{0,66})*\Z"),
    st.from_regex(r"\Asha256=[0-9a-fA-F]{62,66}\Z"),
    st.from_regex(r"\A[0-9]{0,14}\Z"),
)
bodies = st.one_of(st.binary(), st.text().map(str.encode),
                   st.builds(lambda v: json.dumps({"id": v}).encode(), st.text()))  # fmt: skip


def _only_own_errors(verify: Callable[[], VerifiedMessage]) -> None:
    """``verify`` returns or raises a 4xx VerificationError; its ``json()`` only InvalidPayload."""
    failure: VerificationError | None = None
    try:
        message = verify()
    except VerificationError as error:
        failure = error
    if failure is not None:
        assert 400 <= failure.status < 500
        return
    with contextlib.suppress(InvalidPayload):
        message.json()


@given(
    scheme=st.sampled_from([STANDARD, STRIPE, GITHUB]),
    headers=st.dictionaries(st.sampled_from(HEADER_NAMES), header_values),
    body=bodies,
    now=st.one_of(st.integers(0, 10**12), st.floats(0, 10**12)),
)
def test_arbitrary_headers_and_bodies_raise_only_verification_errors(
    scheme: Scheme, headers: Mapping[str, str], body: bytes, now: float
) -> None:
    secret = standard_secret() if scheme is STANDARD else Secret(STRIPE_SECRET)
    _only_own_errors(lambda: Verifier([secret], scheme=scheme).verify(body, headers, now=now))


@given(
    scheme=st.sampled_from([STANDARD, STRIPE, GITHUB]),
    replacement=header_values,
    which=st.integers(0, 2),
    body=bodies,
)
def test_one_mangled_header_of_a_valid_delivery_raises_only_verification_errors(
    scheme: Scheme, replacement: str, which: int, body: bytes
) -> None:
    verifier, _, headers = signed(scheme, body=body)
    name = sorted(headers)[which % len(headers)]
    _only_own_errors(lambda: verifier.verify(body, {**headers, name: replacement}, now=NOW))


@pytest.mark.parametrize(
    "convert",
    [
        lambda h: h,
        lambda h: types.MappingProxyType(h),
        lambda h: {name.title(): value for name, value in h.items()},
        lambda h: {name.upper(): value for name, value in h.items()},
        lambda h: {(k.title() if i == 0 else k): v for i, (k, v) in enumerate(sorted(h.items()))},
    ],
    ids=["dict", "mapping-proxy", "title-case", "upper-case", "mixed"],
)
@pytest.mark.parametrize("scheme", [STANDARD, STRIPE, GITHUB], ids=["standard", "stripe", "github"])
def test_header_names_in_any_case_and_any_mapping(
    scheme: Scheme, convert: Callable[[dict[str, str]], Mapping[str, str]]
) -> None:
    verifier, body, headers = signed(scheme)
    assert verifier.verify(body, convert(headers), now=NOW).event_id == "evt_1"
