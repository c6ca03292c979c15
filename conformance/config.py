"""The runner's settings: defaults, then the config file, then command-line flags.

The file is ``hookproof.toml`` (keys at the top level or in a ``[check]`` table) or the
``[tool.hookproof]`` table of ``pyproject.toml`` (or its ``check`` sub-table), read with
``tomllib``. String values may reference the environment as ``${NAME}`` or ``${NAME:-default}``
so that secrets stay out of files. Every problem — an unreadable file, bad TOML, an unknown key,
a wrong type, an unset variable — is one :class:`~conformance.exceptions.ConfigError` line.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from conformance.answers import Answers, resolve_answers
from conformance.exceptions import ConfigError, UsageError
from conformance.extra_headers import parse_headers
from conformance.model import scheme_choices
from receiver.commands.files import read_toml
from receiver.durations import seconds_of
from receiver.redaction import shown_url
from receiver.signing import SCHEMES, secret_warnings
from sender_sim.urls import url_problem

__all__ = ["CheckSettings", "find_config", "load_config", "substitute_env"]

_ENV = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}")


@dataclass(frozen=True)
class CheckSettings:
    """Everything ``hookproof check`` (and the pytest plugin) can be told."""

    url: str | None = None
    secrets: tuple[str, ...] = ()
    scheme: str = "standard"
    probe: str | None = None
    probe_token: str | None = None
    select: tuple[str, ...] = ()
    deselect: tuple[str, ...] = ()
    timeout: float = 5.0
    concurrency: int = 8
    rate_limit: float | None = None
    wait_for_endpoint: float = 0.0
    max_time: float | None = None
    """The whole run's time budget in seconds (``None``: unbounded); see ``--max-time``."""
    seed: int | None = None
    event_template: str | None = None
    tolerance: int = 300
    margin: int = 10
    samples: int = 20
    patience: float = 1.0
    """Real seconds waited before the late duplicate and the redrive copy (``--patience``)."""
    settle: float = 0.0
    """Real seconds a committed event's effects may take to show on the probe (``--settle``;
    0: they show with the 2xx, as the probe contract says)."""
    max_body: int | None = None
    """The receiver's declared body limit in bytes (``--max-body``; ``None``: not judged)."""
    show_secrets: bool = False
    headers: tuple[tuple[str, str], ...] = ()
    """Extra headers on every webhook, ``(name, value)`` (``--header``, ``[headers]``; see
    :mod:`conformance.extra_headers`)."""
    answers: Answers = ()
    """The refusal codes the platform's sender relies on (``[answers]`` or a preset name)."""
    json: str | None = None
    junit: str | None = None
    ndjson: str | None = None
    """Write the engine's events there, one JSON object per line."""
    verbose: bool = False
    """Every reproduction of a failure, not only the first."""
    app: str | None = None
    """``module:attribute`` of an ASGI app (the pytest plugin checks it in process)."""
    path: str | None = None
    """The app's webhook path (pytest plugin; default ``/webhooks``)."""

    def __repr__(self) -> str:  # secrets never appear in a repr
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        shown["secrets"] = ("***",) * len(self.secrets)
        shown["probe_token"] = "***" if self.probe_token else None
        shown["headers"] = tuple((name, "***") for name, _ in self.headers)
        return "CheckSettings(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    def merged(self, overrides: Mapping[str, Any]) -> CheckSettings:
        """These settings with every override that is not ``None`` (or an empty tuple) applied."""
        given = {k: v for k, v in overrides.items() if v is not None and v != ()}
        return replace(self, **given)

    def warnings(self) -> list[str]:
        """What looks wrong but may be meant: one sentence each, said once before the run."""
        return secret_warnings(self.scheme, self.secrets)

    def report_options(self) -> dict[str, Any]:
        """The run's options as a report records them (no secret, no token, no output path)."""
        hidden = {"url", "secrets", "probe_token", "json", "junit", "ndjson", "app", "path"}
        shown: dict[str, Any] = {}
        for f in fields(self):
            if f.name in hidden:
                continue
            value = getattr(self, f.name)
            if f.name == "answers":
                value = {refusal: list(codes) for refusal, codes in value}
            elif f.name == "headers":  # names only: a value may be a credential
                value = [name for name, _ in value]
            elif isinstance(value, tuple):
                value = list(value)
            shown[f.name] = value
        return shown

    def validate(self) -> CheckSettings:
        if not self.url:
            raise UsageError(
                "no endpoint URL: pass it as 'hookproof check URL' or 'url' in the config"
            )
        for what, url in (("endpoint URL", self.url), ("--probe URL", self.probe)):
            problem = url_problem(url) if url else None
            if problem is not None:
                raise UsageError(f"the {what} {shown_url(url or '')!r} cannot be used: {problem}")
        if self.probe:
            _check_probe_prefix(self.probe)
        if not self.secrets:
            raise UsageError("no secret: pass --secret (repeatable) or 'secret' in the config")
        if self.scheme not in SCHEMES:
            raise UsageError(f"unknown scheme {self.scheme!r}; choose {scheme_choices()}")
        if self.probe and not self.probe_token:
            raise UsageError(
                "--probe needs its token: pass --probe-token (or set HOOKPROOF_PROBE_TOKEN)"
            )
        if self.probe_token and not self.probe:
            raise UsageError(
                "a probe token is set (--probe-token, HOOKPROOF_PROBE_TOKEN or the config) but "
                "no --probe URL: pass --probe, or unset the token"
            )
        if self.timeout <= 0:
            raise UsageError("--timeout must be positive")
        if self.concurrency < 2:
            raise UsageError("--concurrency must be at least 2 (it sends concurrent duplicates)")
        if self.rate_limit is not None and not 0 < self.rate_limit < math.inf:
            raise UsageError("--rate-limit must be a positive number of requests per second")
        if self.tolerance < 0 or self.margin <= 0 or self.samples < 1:
            raise UsageError("tolerance, margin and samples must be positive")
        if self.wait_for_endpoint < 0:
            raise UsageError("--wait-for-endpoint must not be negative")
        if self.max_time is not None and not self.max_time > 0:
            raise UsageError("--max-time must be positive")
        if self.patience < 0 or self.settle < 0:
            raise UsageError("--patience and --settle must not be negative")
        if self.max_body is not None and self.max_body < 1:
            raise UsageError("--max-body must be positive")
        return self


_DURATIONS = frozenset({"timeout", "wait_for_endpoint", "max_time", "patience", "settle"})
"""Keys in seconds: a number, or a duration string such as "30s" or "10m"."""
_TYPES: dict[str, type | tuple[type, ...]] = {
    **dict.fromkeys(_DURATIONS, (int, float, str)),
    "url": str,
    "app": str,
    "path": str,
    "scheme": str,
    "probe": str,
    "probe_token": str,
    "event_template": str,
    "json": str,
    "junit": str,
    "ndjson": str,
    "rate_limit": (int, float),
    "max_body": int,
    "concurrency": int,
    "seed": int,
    "tolerance": int,
    "margin": int,
    "samples": int,
}
_LISTS = {"select", "deselect", "secret", "secrets"}
_TABLES = {"answers", "headers"}


def _check_probe_prefix(prefix: str) -> None:
    """A probe URL is a prefix the event id is appended to, read with the bearer token."""
    parts = urlsplit(prefix)
    if parts.username is not None:
        raise UsageError(
            "the --probe URL names a user (…@): the probe authenticates with its bearer token "
            "(Authorization), which a user in the URL would replace; remove it"
        )
    if parts.query or parts.fragment:
        raise UsageError(
            "the --probe URL is a prefix the event id is appended to: it takes no ?query or "
            "#fragment"
        )


def substitute_env(value: str, key: str, environ: Mapping[str, str]) -> str:
    """Replace ``${NAME}`` / ``${NAME:-default}`` in ``value`` from ``environ``."""

    def lookup(match: re.Match[str]) -> str:
        name = match["name"]
        if name in environ:
            return environ[name]
        if match["default"] is not None:
            return match["default"]
        raise ConfigError(f"config key {key!r} references ${{{name}}}, which is not set")

    return _ENV.sub(lookup, value)


def find_config(explicit: str | None, cwd: Path | None = None) -> tuple[Path, bool] | None:
    """The config file to read and whether it is a pyproject: the explicit one, else
    ``hookproof.toml``, else a ``pyproject.toml`` with ``[tool.hookproof]``."""
    if explicit:
        path = Path(explicit)  # read (or said unreadable, in words) by load_config
        return path, path.name == "pyproject.toml"
    base = cwd or Path.cwd()
    if (base / "hookproof.toml").is_file():
        return base / "hookproof.toml", False
    pyproject = base / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = read_toml(pyproject, "pyproject.toml", ValueError)
        except ValueError:  # not ours to judge: a broken pyproject.toml is no hookproof config
            return None
        if isinstance(data.get("tool"), dict) and "hookproof" in data["tool"]:
            return pyproject, True
    return None


def load_config(
    explicit: str | None = None,
    *,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The settings the config file gives (``{}`` when there is none), as override values."""
    found = find_config(explicit, cwd)
    if found is None:
        return {}
    path, is_pyproject = found
    data = read_toml(path, "the config file", ConfigError)
    if is_pyproject:
        tool = data.get("tool", {})
        data = tool.get("hookproof", {}) if isinstance(tool, dict) else {}
        if not isinstance(data, dict):
            raise ConfigError(f"[tool.hookproof] in {str(path)!r} must be a table")
    table = {k: v for k, v in data.items() if not isinstance(v, dict) or k in _TABLES}
    if isinstance(data.get("check"), dict):
        table.update(data["check"])
    return _convert(table, path, os.environ if environ is None else environ)


def _headers_table(
    value: Any, raw_key: str, path: Path, environ: Mapping[str, str]
) -> tuple[tuple[str, str], ...]:
    """A ``[headers]`` table (``Name = "value"``, ``${ENV}`` allowed) as header pairs."""
    where = f"'{raw_key}' in {str(path)!r}"
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a table of header names and values")
    substituted = {
        name: substitute_env(item, raw_key, environ) if isinstance(item, str) else item
        for name, item in value.items()
    }
    try:
        return parse_headers(substituted, where)
    except UsageError as error:
        raise ConfigError(str(error)) from None


def _convert(table: Mapping[str, Any], path: Path, environ: Mapping[str, str]) -> dict[str, Any]:
    known = set(_TYPES) | _LISTS | _TABLES | {"show_secrets"}
    values: dict[str, Any] = {}
    for raw_key, value in table.items():
        key = raw_key.replace("-", "_")
        if key not in known:
            raise ConfigError(
                f"unknown key {raw_key!r} in {str(path)!r}; known keys: {', '.join(sorted(known))}"
            )
        if key in _LISTS:
            items = [value] if isinstance(value, str) else value
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise ConfigError(f"config key {raw_key!r} must be a string or a list of strings")
            converted = tuple(substitute_env(i, raw_key, environ) for i in items)
            values["secrets" if key in ("secret", "secrets") else key] = converted
        elif key == "answers":
            values[key] = resolve_answers(value, f"'answers' in {str(path)!r}")
        elif key == "headers":
            values[key] = _headers_table(value, raw_key, path, environ)
        elif key == "show_secrets":
            if not isinstance(value, bool):
                raise ConfigError("config key 'show_secrets' must be true or false")
            values[key] = value
        else:
            expected = _TYPES[key]
            if isinstance(value, bool) or not isinstance(value, expected):
                raise ConfigError(
                    f"config key {raw_key!r} has the wrong type ({type(value).__name__})"
                )
            if isinstance(value, str):
                value = substitute_env(value, raw_key, environ)
            if key in _DURATIONS:
                try:
                    value = seconds_of(value)
                except ValueError as error:
                    raise ConfigError(f"config key {raw_key!r}: {error}") from None
            if key == "event_template":
                value = str((path.parent / value).resolve())
            values[key] = value
    return values
