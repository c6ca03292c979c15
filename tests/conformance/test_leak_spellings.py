"""A secret or signature an answer carries is found, and scrubbed from the report, in every
spelling an answer may give it: as is, JSON-escaped with ``\\/`` (PHP's ``json_encode`` writes
every ``/`` of a base64 value so) and percent-encoded."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from urllib.parse import quote

import pytest

from conformance.harnesses.exchanges import scrub, spellings
from conformance.results import Outcome
from tests.conformance.support import app_settings, refusing_app, run_in_process

SECRET = "whsec_" + base64.b64encode(b"\xfb\xff\xbf" * 8).decode()
"""A secret whose base64 holds ``/`` and ``+``."""


def test_the_secret_used_here_has_the_characters_that_get_escaped() -> None:
    assert "/" in SECRET
    assert "+" in SECRET


def test_every_spelling_of_a_value_is_scrubbed() -> None:
    text = " ".join(
        [SECRET, SECRET.replace("/", "\\/"), quote(SECRET, safe=""), json.dumps({"s": SECRET})]
    )
    assert SECRET.replace("/", "\\/") in spellings(SECRET)
    scrubbed = scrub(text, {SECRET})
    assert all(form not in scrubbed for form in spellings(SECRET))
    assert scrubbed.count("<redacted>") == 4


@pytest.mark.parametrize(
    "spelling",
    [
        pytest.param(lambda: SECRET.replace("/", "\\/"), id="json-escaped"),
        pytest.param(lambda: quote(SECRET, safe=""), id="percent-encoded"),
    ],
)
def test_a_secret_echoed_in_another_spelling_is_a_leak(spelling: Callable[[], str]) -> None:
    app = refusing_app(
        lambda _: '{"error":"bad signature","config":{"secret":"' + spelling() + '"}}'
    )
    settings = app_settings(None, secrets=(SECRET,), select=("response.no-secret-leak",))
    result = run_in_process(app, settings)["response.no-secret-leak"]
    assert result.outcome is Outcome.FAILED
    assert all(SECRET not in f.observed and spelling() not in f.observed for f in result.failures)


def test_an_answer_without_the_secret_is_no_leak() -> None:
    app = refusing_app(
        lambda _: '{"error":"bad signature","see":"https:\\/\\/example.test\\/docs"}'
    )
    settings = app_settings(None, secrets=(SECRET,), select=("response.no-secret-leak",))
    result = run_in_process(app, settings)["response.no-secret-leak"]
    assert result.outcome is Outcome.PASSED
