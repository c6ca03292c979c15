"""The one rule for a webhook endpoint's URL (sender_sim/urls.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sender_sim.urls import url_problem


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/webhooks",
        "https://partner.example/hooks?tenant=1",
        "http://[::1]:65535/",
        "http://localhost/",
    ],
)
def test_an_http_url_with_a_host_can_address_an_endpoint(url: str) -> None:
    assert url_problem(url) is None


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("", "required"),
        (None, "required"),
        ("ftp://127.0.0.1/x", "http:// or https://"),
        ("127.0.0.1:8000/webhooks", "http:// or https://"),
        ("http:///webhooks", "no host"),
        ("http://[::1/x", "not a valid URL"),
        ("http://127.0.0.1:99999/x", "port 99999"),
        ("http://127.0.0.1:0/x", "port 0"),
        ("http://host/\x00", "not a valid URL"),
    ],
)
def test_anything_else_is_refused_in_words(url: object, problem: str) -> None:
    said = url_problem(url)
    assert said is not None
    assert problem in said


@given(st.integers(min_value=-100_000, max_value=200_000))
def test_a_port_is_accepted_exactly_when_it_exists(port: int) -> None:
    said = url_problem(f"http://127.0.0.1:{port}/webhooks")
    if 1 <= port <= 65535:
        assert said is None
    else:
        assert said is not None
