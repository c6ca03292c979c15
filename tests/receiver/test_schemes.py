"""Each scheme object owns everything about its scheme: the signed content, where the event id
lives, minting and parsing secrets, fingerprints, decoy signatures and redaction."""

from __future__ import annotations

import json
import random
import re

import pytest

from receiver.exceptions import ConfigurationError
from receiver.signing import SCHEMES, Verifier, event_id_of, redact_signatures, scheme_named

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
