"""The one rule of what a credential is, and a URL shown without its password and token values:
used by the sender's displays, the runner's reports and the receiver's inbox line alike."""

from __future__ import annotations

import pytest

from receiver.redaction import REDACTED, is_credential, shown_url, url_credentials

PASSWORD = "pa55-w0rd-long"
TOKEN = "tok-9f8e7d6c5b"


@pytest.mark.parametrize(
    ("url", "shown", "secrets"),
    [
        (
            f"http://alice:{PASSWORD}@h:8/w",
            f"http://alice:{REDACTED}@h:8/w",
            (PASSWORD,),
        ),
        (
            f"https://h/w?token={TOKEN}&page=2&api_key=a%2Fb",
            f"https://h/w?token={REDACTED}&page=2&api_key={REDACTED}",
            (TOKEN, "a%2Fb", "a/b"),
        ),
        ("https://alice@h/w?page=2#x", "https://alice@h/w?page=2#x", ()),
        ("http://h/w", "http://h/w", ()),
        ("http://[::1", "http://[::1", ()),  # not a URL: shown as given, nothing found in it
    ],
)
def test_a_urls_credentials_are_found_and_hidden(
    url: str, shown: str, secrets: tuple[str, ...]
) -> None:
    assert shown_url(url) == shown
    assert shown_url(url, show_secrets=True) == url
    assert url_credentials(url) == secrets


@pytest.mark.parametrize(
    ("name", "credential"),
    [
        ("Authorization", True),
        ("proxy-authorization", True),
        ("Cookie", True),
        ("X-Api-Key", True),
        ("access_token", True),
        ("X-Session-Id", True),
        ("page", False),
        ("Content-Type", False),
        ("webhook-id", False),
    ],
)
def test_one_rule_says_which_names_carry_a_credential(name: str, credential: bool) -> None:
    assert is_credential(name) is credential
