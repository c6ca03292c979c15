"""response.no-secret-hint: a refusal that names the last characters of the endpoint's secret
(as stripe-node's error message does, sent back by Stripe's sample) is a ``should`` failure; the
same four letters inside a word, or echoed from the request, are not."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conformance.model import Severity
from conformance.results import Outcome
from tests.conformance.support import app_settings, refusing_app, run_in_process

SECRET = "whsec_test_stripe_secret"
"""A secret whose last four characters ("cret") are also inside the word "secret", which the
hinted request itself carries (its ``secret=`` item)."""

Answer = Callable[[dict[str, str]], str]


def _stripe_node_message(headers: dict[str, str]) -> str:
    masked = headers["stripe-signature"].rsplit("secret=", 1)[-1]
    return (
        f"Webhook Error: The signing secret you provided is {len(SECRET)} characters long and "
        f"ends in `{SECRET[-4:]}`. However, the signing secret for this destination looks like "
        f"`{masked}`."
    )


@pytest.mark.parametrize(
    ("answer", "names_part"),
    [
        (_stripe_node_message, True),
        (lambda headers: "Webhook Error: No signatures found matching the secret", False),
        (lambda headers: f"you sent {headers['stripe-signature']}", False),
    ],
)
def test_only_an_answer_naming_the_secrets_last_characters_fails(
    answer: Answer, names_part: bool
) -> None:
    settings = app_settings(
        None, scheme="stripe", secrets=(SECRET,), select=("response.no-secret-hint",)
    )
    result = run_in_process(refusing_app(answer), settings)["response.no-secret-hint"]
    assert (result.outcome is Outcome.FAILED) is names_part, result.failures
    if names_part:
        assert result.scenario.severity is Severity.SHOULD
        assert "last four characters" in result.failures[0].observed
        assert SECRET not in result.failures[0].observed + result.failures[0].reproduce


def test_the_hint_describes_another_secret_than_the_runners() -> None:
    seen: list[str] = []

    def remember(headers: dict[str, str]) -> str:
        seen.append(headers["stripe-signature"])
        return "no"

    settings = app_settings(
        None, scheme="stripe", secrets=(SECRET,), select=("response.no-secret-hint",)
    )
    run_in_process(refusing_app(remember), settings)
    (header,) = seen
    masked = header.rsplit("secret=", 1)[-1]
    assert masked.startswith("whsec_*")
    assert masked[-4:] != SECRET[-4:]
