"""Parsing a PostgreSQL inbox location (no server needed): whose parameter is whose, secrecy."""

from __future__ import annotations

import subprocess
import sys
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from psycopg.conninfo import conninfo_to_dict

from receiver.exceptions import ConfigurationError
from receiver.inbox.postgres import DEFAULT_APPLICATION_NAME, parse_location

passwords = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=4, max_size=30
)
schemas = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,40}", fullmatch=True)


@given(password=passwords, schema=schemas)
def test_the_password_reaches_libpq_but_never_the_display_name(password: str, schema: str) -> None:
    location = f"postgresql://app:{quote(password, safe='')}@db.internal:6543/inbox?schema={schema}"
    parsed = parse_location(location)
    assert conninfo_to_dict(parsed.conninfo)["password"] == password
    assert parsed.display == "postgresql://app@db.internal:6543/inbox"
    assert parsed.password == password
    assert parsed.schema == schema
    assert "schema" not in conninfo_to_dict(parsed.conninfo)


def test_hookproof_parameters_are_taken_out_and_libpq_ones_kept() -> None:
    parsed = parse_location(
        "postgres://u@h/db?sslmode=disable&pool_min_size=2&pool_max_size=3"
        "&pool_timeout=0.5&pool_reconnect_timeout=4&application_name=mine"
    )
    params = conninfo_to_dict(parsed.conninfo)
    assert params["sslmode"] == "disable"
    assert params["application_name"] == "mine"
    assert not {"pool_min_size", "pool_max_size", "pool_timeout"} & set(params)
    assert (parsed.pool_min_size, parsed.pool_max_size) == (2, 3)
    assert (parsed.pool_timeout, parsed.pool_reconnect_timeout) == (0.5, 4.0)
    assert parsed.application_name is None  # libpq gets the user's own
    assert parse_location("postgresql://u@h/db").application_name == DEFAULT_APPLICATION_NAME


def test_schema_sources_in_order_of_precedence() -> None:
    options = "options=-csearch_path%3Dfrom_options,public"
    assert parse_location(f"postgresql://h/db?{options}").schema == "from_options"
    assert not parse_location(f"postgresql://h/db?{options}").set_search_path
    assert parse_location(f"postgresql://h/db?{options}&schema=from_url").schema == "from_url"
    assert parse_location("postgresql://h/db?schema=from_url", schema="from_arg").schema == (
        "from_arg"
    )
    assert parse_location("postgresql://h/db").schema == "public"


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("sqlite:///x.db", "postgresql://"),
        ("postgresql://h/db?schema=1starts_with_digit", "schema name"),
        ("postgresql://h/db?schema=" + "x" * 64, "schema name"),
        ("postgresql://h/db?pool_max_size=many", "pool_max_size"),
        ("postgresql://h/db?pool_timeout=-1", "pool_timeout"),
        ("postgresql://h/db?no_such_libpq_parameter=1", "no_such_libpq_parameter"),
    ],
)
def test_bad_locations_are_configuration_errors(location: str, expected: str) -> None:
    with pytest.raises(ConfigurationError, match=expected):
        parse_location(location)


def test_without_psycopg_the_receiver_cli_says_so_in_one_line() -> None:
    """A real process where psycopg cannot be imported: one line, exit status 2, no traceback."""
    program = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None; "
        "from conformance.cli import run; run()"
    )
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    location = "postgresql://app:hunter2@127.0.0.1:1/inbox"
    done = subprocess.run(
        [sys.executable, "-c", program, "receiver", "--secret", secret, "--db", location],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "hookproof[postgres]" in lines[0]
    assert "hunter2" not in done.stderr
