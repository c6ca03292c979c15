"""Each scheme object owns everything about its scheme: the signed content, where the event id
lives, minting and parsing secrets, fingerprints, decoy signatures, redaction, and what the
conformance runner builds from it (roles, listed decoys, dropped roles, fuzz grammar)."""

from __future__ import annotations

import hmac
import json
import random
import re

import pytest

from receiver.exceptions import ConfigurationError, InvalidPayload, VerificationError
from receiver.signing import (
    SCHEMES,
    Scheme,
    Secret,
    Verifier,
    event_id_of,
    redact_signatures,
    scheme_named,
)

NOW = 1_700_000_000
BODY = json.dumps({"id": "evt_in_body", "type": "ping"}).encode()


@pytest.mark.parametrize(
    ("name", "expected"),
    [("standard", "evt_header"), ("stripe", "evt_in_body"), ("github", "evt_header")],
)
def test_each_scheme_finds_its_event_id_where_it_lives(name: str, expected: str) -> None:
    scheme = scheme_named(name)
    secret = scheme.mint_secret()
    headers = scheme.sign(BODY, secrets=[secret], event_id="evt_header", timestamp=NOW)
    assert scheme.event_id(headers, BODY) == expected
    assert event_id_of(headers, BODY) == expected
    assert Verifier([secret], scheme=scheme).verify(BODY, headers, now=NOW).event_id == expected


def test_a_missing_event_id_is_empty_not_an_error() -> None:
    for scheme in SCHEMES.values():
        assert scheme.event_id({}, b"\xff not json") == ""
    assert event_id_of({}, b"[]") == ""


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_minted_secrets_are_usable_fresh_and_seedable(name: str) -> None:
    scheme = scheme_named(name)
    first, second = scheme.mint_secret(), scheme.mint_secret()
    assert first != second
    assert scheme.parse_secret(first.value) == first
    assert scheme.mint_secret(b"seed") == scheme.mint_secret(b"seed")
    assert (
        scheme.fingerprint([first]) == scheme.fingerprint([first]) != scheme.fingerprint([second])
    )
    assert first.value not in scheme.fingerprint([first])


def test_a_secret_unusable_for_a_scheme_is_refused() -> None:
    with pytest.raises(ConfigurationError):
        scheme_named("standard").parse_secret("whsec_not*base64")


@pytest.mark.parametrize("name", ["standard", "stripe"])
@pytest.mark.parametrize("kind", ["rotation", "unknown-version"])
def test_a_decoy_signature_comes_first_and_is_skipped(name: str, kind: str) -> None:
    scheme = scheme_named(name)
    secret = scheme.mint_secret()
    headers = scheme.sign(BODY, secrets=[secret], event_id="evt_header", timestamp=NOW)
    key = random.Random(1).randbytes(32)
    decoyed = scheme.decoy(
        headers, kind=kind, body=BODY, event_id="evt_header", timestamp=NOW, key=key
    )
    assert decoyed[scheme.signature_header].endswith(
        headers[scheme.signature_header].split(",")[-1]
    )
    assert decoyed[scheme.signature_header] != headers[scheme.signature_header]
    assert Verifier([secret], scheme=scheme).verify(BODY, decoyed, now=NOW).secret_index == 0


def test_github_carries_one_signature_so_it_has_no_decoy() -> None:
    scheme = scheme_named("github")
    headers = scheme.sign(BODY, secrets=[scheme.mint_secret()], event_id="e", timestamp=NOW)
    with pytest.raises(ConfigurationError, match="single signature"):
        scheme.decoy(headers, kind="rotation", body=BODY, event_id="e", timestamp=NOW, key=b"k")


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_signatures_and_secrets_are_redacted_from_text(name: str) -> None:
    scheme = scheme_named(name)
    secret = scheme.mint_secret()
    headers = scheme.sign(BODY, secrets=[secret], event_id="evt_header", timestamp=NOW)
    text = f"echo: {headers[scheme.signature_header]} and {secret.value}"
    for redacted in (scheme.redact(text), redact_signatures(text)):
        assert "***" in redacted
        digest = max(re.split(r"[,= ]", headers[scheme.signature_header]), key=len)
        assert len(digest) >= 40
        assert digest not in redacted
    for value in scheme.secret_texts([secret]):
        assert value in text or value == secret.value.removeprefix("whsec_")


def test_the_signed_content_is_what_each_scheme_signs() -> None:
    assert scheme_named("standard").signed_content(b"{}", event_id="e", timestamp=5) == b"e.5.{}"
    assert scheme_named("stripe").signed_content(b"{}", event_id="e", timestamp=5) == b"5.{}"
    assert scheme_named("github").signed_content(b"{}", event_id="e", timestamp=5) == b"{}"


# -- what the conformance runner asks of a scheme (it never branches on the scheme's name) ------


def _signed(name: str) -> tuple[Scheme, Secret, dict[str, str]]:
    scheme = scheme_named(name)
    secret = scheme.mint_secret(b"test-secret-material")
    return scheme, secret, scheme.sign(BODY, secrets=[secret], event_id="evt_header", timestamp=NOW)


def test_each_scheme_says_where_its_roles_live() -> None:
    assert scheme_named("standard").roles == ("id", "timestamp", "signature")
    assert scheme_named("stripe").roles == ("id", "timestamp", "signature")
    assert scheme_named("github").roles == ("id", "signature")
    assert scheme_named("svix").roles == scheme_named("standard").roles
    assert {n for n, s in SCHEMES.items() if s.id_in_body} == {"stripe"}
    several = {n for n, s in SCHEMES.items() if s.several_signatures}
    assert several == {"standard", "svix", "stripe"}
    assert scheme_named("github").unsigned_headers == frozenset({"x-github-delivery"})


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_the_timestamp_is_read_where_the_scheme_carries_it(name: str) -> None:
    scheme, _, headers = _signed(name)
    assert scheme.timestamp_of(headers) == (NOW if scheme.uses_timestamp else None)
    assert scheme.timestamp_of({}) is None
    assert scheme.timestamp_of({k: "t=abc,x" for k in headers}) is None


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_a_garbled_signature_is_malformed_for_its_scheme(name: str) -> None:
    scheme, secret, headers = _signed(name)
    garbled = {**headers, scheme.signature_header: scheme.garbled_signature}
    with pytest.raises(VerificationError):
        Verifier([secret], scheme=scheme).verify(BODY, garbled, now=NOW)


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_signature_values_are_the_secret_derived_ones(name: str) -> None:
    scheme, _secret, headers = _signed(name)
    values = scheme.signature_values(headers)
    assert len(values) == 1 + len(scheme.companion_headers)
    assert values[0] in headers[scheme.signature_header]
    for value, companion in zip(values[1:], sorted(scheme.companion_headers), strict=True):
        assert value in headers[companion]
    assert str(NOW) not in values
    assert scheme.signature_values({}) == []


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_a_signature_of_any_length_is_written_in_the_scheme_grammar(name: str) -> None:
    scheme, secret, headers = _signed(name)
    digest = hmac.digest(
        scheme.key(secret),
        scheme.signed_content(BODY, event_id="evt_header", timestamp=NOW),
        "sha256",
    )
    value = scheme.signature_with(digest, timestamp=NOW)
    assert value == headers[scheme.signature_header]
    short = scheme.signature_with(b"\x01" * 16, timestamp=NOW)
    assert short != value
    assert short.startswith(value[:3])


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_the_scheme_digest_is_the_signature_it_sends(name: str) -> None:
    scheme, secret, headers = _signed(name)
    digest = scheme.digest(BODY, secret=secret, event_id="evt_header", timestamp=NOW)
    assert len(digest) == 32
    assert scheme.signature_with(digest, timestamp=NOW) == headers[scheme.signature_header]
    other = scheme.digest(BODY + b" ", secret=secret, event_id="evt_header", timestamp=NOW)
    assert other != digest


@pytest.mark.parametrize("name", sorted(SCHEMES))
@pytest.mark.parametrize("keep", [3, 30])
def test_a_truncated_signature_is_a_prefix_of_the_genuine_text(name: str, keep: int) -> None:
    """signature.truncated-signature's values: a prefix of the genuine header value's text, so a
    string ``startsWith`` comparison takes it as readily as a byte-prefix one."""
    scheme, secret, headers = _signed(name)
    digest = scheme.digest(BODY, secret=secret, event_id="evt_header", timestamp=NOW)
    truncated = scheme.signature_with(digest[:keep], timestamp=NOW)
    genuine = headers[scheme.signature_header]
    assert genuine.startswith(truncated)
    assert len(truncated) < len(genuine)


@pytest.mark.parametrize("name", ["standard", "stripe"])
@pytest.mark.parametrize("position", ["first", "middle", "last"])
def test_the_valid_signature_is_listed_among_two_decoys(name: str, position: str) -> None:
    scheme, secret, headers = _signed(name)
    listed = scheme.listed(
        headers,
        position=position,
        body=BODY,
        event_id="evt_header",
        timestamp=NOW,
        key=b"\x02" * 32,
        unknown=b"\x03" * 32,
    )
    (valid,) = scheme.signature_values(headers)
    values = scheme.signature_values(listed)
    assert len(values) == 3
    assert values.index(valid) == {"first": 0, "middle": 1, "last": 2}[position]
    assert Verifier([secret], scheme=scheme).verify(BODY, listed, now=NOW).secret_index == 0


def test_github_lists_no_decoys() -> None:
    scheme, _, headers = _signed("github")
    with pytest.raises(ConfigurationError, match="single signature"):
        scheme.listed(
            headers,
            position="first",
            body=BODY,
            event_id="e",
            timestamp=NOW,
            key=b"k",
            unknown=b"u",
        )


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_dropping_a_role_leaves_a_delivery_the_verifier_refuses(name: str) -> None:
    scheme, secret, headers = _signed(name)
    verifier = Verifier([secret], scheme=scheme)
    for role in scheme.roles:
        dropped, body = scheme.drop(role, headers, BODY, secrets=[secret])
        assert (dropped, body) != (headers, BODY)
        with pytest.raises(VerificationError):
            verifier.verify(body, dropped, now=NOW)
    if "timestamp" not in scheme.roles:
        with pytest.raises(ConfigurationError, match="no timestamp to drop"):
            scheme.drop("timestamp", headers, BODY, secrets=[secret])


def test_stripe_drops_the_id_from_the_body_and_signs_again() -> None:
    scheme, secret, headers = _signed("stripe")
    dropped, body = scheme.drop("id", headers, BODY, secrets=[secret])
    assert "id" not in json.loads(body)
    assert scheme.timestamp_of(dropped) == NOW
    with pytest.raises(InvalidPayload):  # the signature is right, the id is gone
        Verifier([secret], scheme=scheme).verify(body, dropped, now=NOW)


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_the_broken_headers_are_the_scheme_headers_and_seeded(name: str) -> None:
    scheme, _, headers = _signed(name)
    first = scheme.broken_headers(timestamp=NOW, rng=random.Random(5))
    assert first == scheme.broken_headers(timestamp=NOW, rng=random.Random(5))
    assert {b.name for b in first} == set(headers) - scheme.companion_headers
    assert {b.role for b in first} <= set(scheme.roles)
    signature = next(b for b in first if b.role == "signature")
    assert signature.name == scheme.signature_header
    assert signature.values


def test_only_a_secret_foreign_to_the_scheme_is_warned_about() -> None:
    standard = scheme_named("standard")
    assert standard.secret_warning(standard.mint_secret().value) is None
    warning = standard.secret_warning("plain-string")
    assert warning is not None
    assert warning.startswith("does not start with 'whsec_'")
    for name in ("stripe", "github"):
        assert scheme_named(name).secret_warning("plain-string") is None


def test_a_companion_signature_travels_only_beside_a_genuine_own_one() -> None:
    """GitHub's legacy SHA-1 header is sent with every genuine delivery; once the SHA-256
    signature is broken or repeated, it goes too (it would authenticate the request alone)."""
    scheme = scheme_named("github")
    secret = Secret("github-companion-secret")
    body = b'{"zen":"Keep it logically awesome."}'
    signed = scheme.sign(body, secrets=[secret], event_id="d-1", timestamp=NOW)
    genuine = tuple((k, v.encode()) for k, v in signed.items())
    keys = [scheme.key(secret)]
    assert scheme.agreeing(genuine, body, keys=keys) == genuine
    broken = tuple(
        (k, b"sha256=" + b"0" * 64 if k == "x-hub-signature-256" else v) for k, v in genuine
    )
    repeated = (*genuine, ("X-Hub-Signature-256", signed["x-hub-signature-256"].encode()))
    for request in (broken, repeated, genuine[:1] + genuine[2:]):
        kept = {name.lower() for name, _ in scheme.agreeing(request, body, keys=keys)}
        assert "x-hub-signature" not in kept
    assert scheme.agreeing(genuine, body + b" ", keys=keys) != genuine  # another body
    standard = scheme_named("standard")
    other = tuple(
        (k, v.encode())
        for k, v in standard.sign(
            body, secrets=[standard.mint_secret()], event_id="e", timestamp=NOW
        ).items()
    )
    assert standard.agreeing(other, b"tampered", keys=[]) == other  # no companions to drop
