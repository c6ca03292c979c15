"""The options several ``hookproof`` commands share, each declared once: ``--secret``, ``--scheme``,
``--seed``, ``--timeout``, ``--db``, ``--probe-token``, ``--max-time`` and ``--verbose``; and
what is said about the secrets given (:func:`required_secrets`, :func:`warn_about_secrets`).

Each is a factory returning a click decorator, parametrised only where a command legitimately
differs (a default that comes from a config file, what a seed draws, which database). The scheme
choices are the scheme registry's names (:data:`receiver.signing.SCHEMES`), never a literal list.
``receiver`` is the leaf every package may import, so the declarations live here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import click

from receiver.durations import POSITIVE_DURATION
from receiver.signing import SCHEMES, secret_warnings

__all__ = [
    "PROBE_TOKEN_ENV",
    "SECRET_ENV",
    "db_option",
    "max_time_option",
    "probe_token_option",
    "required_secrets",
    "scheme_option",
    "secret_option",
    "seed_option",
    "split_secrets",
    "timeout_option",
    "verbose_option",
    "warn_about_secrets",
]

F = TypeVar("F", bound=Callable[..., Any])

SECRET_ENV = "HOOKPROOF_SECRET"
"""The environment variable ``--secret`` falls back to (several secrets separated by spaces)."""

PROBE_TOKEN_ENV = "HOOKPROOF_PROBE_TOKEN"
"""The environment variable ``--probe-token`` falls back to."""


def split_secrets(values: Iterable[str]) -> tuple[str, ...]:
    """Every secret given, each value possibly holding several separated by spaces (as
    :data:`SECRET_ENV` does)."""
    return tuple(part for value in values for part in value.split())


def _split_secrets(_ctx: click.Context, _param: click.Parameter, values: Any) -> tuple[str, ...]:
    return split_secrets(values or ())


def secret_option() -> Callable[[F], F]:
    """``--secret`` (repeatable, into the ``secrets`` parameter), falling back to
    :data:`SECRET_ENV`; the command receives every secret split apart (:func:`split_secrets`)."""
    return click.option(
        "--secret",
        "secrets",
        multiple=True,
        envvar=SECRET_ENV,
        callback=_split_secrets,
        help="Signing secret (whsec_… for standard); repeat to use several at once (rotation). "
        f"Env: {SECRET_ENV}, several separated by spaces.",
    )


def required_secrets(secrets: tuple[str, ...]) -> tuple[str, ...]:
    """``secrets``, or the usage error a command that cannot work without one gives."""
    if not secrets:
        raise click.UsageError(f"at least one --secret (or {SECRET_ENV}) is required")
    return secrets


def warn_about_secrets(scheme: str, secrets: Iterable[str]) -> None:
    """Say on stderr, once and before any work, what looks wrong in the secrets a command signs
    with under ``scheme`` (:func:`receiver.signing.secret_warnings`)."""
    for warning in secret_warnings(scheme, tuple(secrets)):
        click.echo(f"hookproof: warning: {warning}", err=True)


def scheme_option(
    default: str | None = "standard", *, help: str = "Signing scheme."
) -> Callable[[F], F]:
    """``--scheme``, one of the registered schemes. ``default=None`` leaves the choice to the
    caller (a config file, say); ``help`` then says what the default is."""
    return click.option(
        "--scheme",
        type=click.Choice(sorted(SCHEMES)),
        default=default,
        show_default=default is not None,
        help=help,
    )


def seed_option(default: int | None = 0, *, draws: str = "the random draws") -> Callable[[F], F]:
    """``--seed``: the integer seed of ``draws`` (the same seed replays the same run)."""
    return click.option(
        "--seed",
        type=int,
        default=default,
        show_default=default is not None,
        help=f"Seed of {draws}; the same seed replays the same run.",
    )


def timeout_option(*, default_text: str) -> Callable[[F], F]:
    """``--timeout``: seconds to wait for each answer; unset (``None``) means ``default_text``."""
    return click.option(
        "--timeout",
        type=POSITIVE_DURATION,
        default=None,
        help=f"How long to wait for each answer: seconds, or 250ms, 30s, 1m (default: "
        f"{default_text}).",
    )


def db_option(*, default: str, help: str, metavar: str = "PATH") -> Callable[[F], F]:
    """``--db``: where a command keeps its state (which database, and its default, differ)."""
    return click.option("--db", default=default, show_default=True, metavar=metavar, help=help)


def probe_token_option() -> Callable[[F], F]:
    """``--probe-token``: the probe's bearer token, falling back to :data:`PROBE_TOKEN_ENV`."""
    return click.option(
        "--probe-token",
        default=None,
        envvar=PROBE_TOKEN_ENV,
        help=f"Bearer token of the probe. Env: {PROBE_TOKEN_ENV}.",
    )


def max_time_option() -> Callable[[F], F]:
    """``--max-time``: the whole run's budget in seconds (unset: unbounded)."""
    return click.option(
        "--max-time",
        type=POSITIVE_DURATION,
        default=None,
        help="Stop the whole run after this long: seconds, or 90s, 10m, 1h (a scenario still "
        "running then errors).",
    )


def verbose_option(*, shows: str) -> Callable[[F], F]:
    """``--verbose`` / ``-v``: ``shows`` more."""
    return click.option("--verbose", "-v", is_flag=True, default=None, help=f"Show {shows}.")
