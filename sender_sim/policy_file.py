"""A retry policy written as a TOML file: what a sender promises, as one :class:`Policy` value.

The same file configures ``hookproof send --policy-file`` and declares what
``hookproof check-sender --policy`` holds a sender to, so the promise is written once::

    delays = [0, 1, 2]         # seconds (or "1m", "2h"); the first is the first attempt's delay,
                               # each later one the delay after the previous *scheduled* time;
                               # the last one repeats
    # or, instead of delays:   backoff = "full-jitter"  base = 1  cap = 2
    max_attempts = 4
    timeout = 1                # seconds the sender waits for an answer
    honor_retry_after = true   # honour Retry-After on the retried statuses (default true)
    [classification]           # a 2xx always ends delivery; an exact status beats its class
    retry = ["429", "5xx", "timeout", "connection"]
    stop = ["1xx", "3xx", "4xx"]

Statuses no rule names stop; ``timeout`` and ``connection`` (connect, DNS, TLS and other network
failures) are retried unless listed under ``stop``. Every mistake is a
:class:`~sender_sim.exceptions.ConfigurationError` naming the file and the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from receiver.commands.files import read_toml
from receiver.durations import seconds_of
from sender_sim.classify import Action, Profile, StatusRule, Verdict
from sender_sim.exceptions import ConfigurationError
from sender_sim.policy import FixedSchedule, FullJitter, Policy
from sender_sim.records import DeadLetterReason, OutcomeKind

__all__ = ["DEFAULT_CLASSIFICATION", "load_policy_file", "policy_from_mapping"]

DEFAULT_CLASSIFICATION: Mapping[str, tuple[str, ...]] = {
    "retry": ("429", "5xx", "timeout", "connection"),
    "stop": ("1xx", "3xx", "4xx"),
}
"""The classification a file gets when it has no ``[classification]`` table (the strict one)."""

_KEYS = frozenset(
    {"delays", "backoff", "base", "cap", "max_attempts", "timeout", "honor_retry_after"}
)
_EXACT = re.compile(r"^[1-5]\d\d$")
_CLASS = re.compile(r"^[1-5]xx$")
_TRANSPORT: Mapping[str, tuple[OutcomeKind, ...]] = {
    "timeout": (OutcomeKind.TIMEOUT,),
    "connection": (OutcomeKind.CONNECT, OutcomeKind.DNS, OutcomeKind.TLS, OutcomeKind.NETWORK),
}
_DELIVERED = Verdict("success", Action.DELIVERED)
_STOP = Verdict("permanent", Action.DEAD_LETTER, DeadLetterReason.PERMANENT_RESPONSE)


def _seconds(value: Any, where: str) -> float:
    try:
        return seconds_of(value)
    except ValueError as error:
        raise ConfigurationError(f"{where}: {error}") from None


def _rule(token: str, verdict: Verdict, where: str) -> StatusRule:
    if _EXACT.match(token):
        return StatusRule(int(token), int(token), verdict)
    if _CLASS.match(token):
        low = int(token[0]) * 100
        return StatusRule(low, low + 99, verdict)
    raise ConfigurationError(
        f"{where}: {token!r} is not a status (429), a class (5xx), 'timeout' or 'connection'"
    )


def _profile(table: Mapping[str, Any], honor_retry_after: bool, where: str) -> Profile:
    unknown = set(table) - {"retry", "stop"}
    if unknown:
        raise ConfigurationError(f"{where}: unknown key {sorted(unknown)[0]!r} in [classification]")
    retry = Verdict("retry", Action.RETRY, honor_retry_after=honor_retry_after)
    exact: list[StatusRule] = []
    classes: list[StatusRule] = []
    failures = {kind: Verdict(kind.value, Action.RETRY, ambiguous=True) for kind in OutcomeKind}
    for key, verdict in (("retry", retry), ("stop", _STOP)):
        tokens = table.get(key, DEFAULT_CLASSIFICATION[key])
        if not isinstance(tokens, Sequence) or isinstance(tokens, str):
            raise ConfigurationError(f"{where}: classification.{key} must be a list of strings")
        for token in tokens:
            text = str(token).strip().lower()
            if text in _TRANSPORT:
                for kind in _TRANSPORT[text]:
                    failures[kind] = Verdict(
                        kind.value, verdict.action, verdict.reason, False, True
                    )
                continue
            rule = _rule(text, verdict, f"{where}: classification.{key}")
            (exact if rule.low == rule.high else classes).append(rule)
    del failures[OutcomeKind.RESPONSE]
    rules = (StatusRule(200, 299, _DELIVERED), *exact, *classes)
    return Profile(name="file", rules=rules, default=_STOP, failures=failures)


def policy_from_mapping(document: Mapping[str, Any], *, name: str = "file") -> Policy:
    """The :class:`Policy` a parsed policy document declares (``name`` says where it came from)."""
    where = name
    unknown = set(document) - _KEYS - {"classification"}
    if unknown:
        raise ConfigurationError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    backoff: FixedSchedule | FullJitter
    if "delays" in document:
        if "backoff" in document:
            raise ConfigurationError(f"{where}: give either 'delays' or 'backoff', not both")
        delays = document["delays"]
        if not isinstance(delays, list) or not delays:
            raise ConfigurationError(f"{where}: 'delays' must be a non-empty list")
        backoff = FixedSchedule(
            tuple(timedelta(seconds=_seconds(d, f"{where}: delays")) for d in delays)
        )
    elif document.get("backoff", "full-jitter") == "full-jitter":
        backoff = FullJitter(
            base=timedelta(seconds=_seconds(document.get("base", 5), f"{where}: base")),
            cap=timedelta(seconds=_seconds(document.get("cap", 900), f"{where}: cap")),
        )
    else:
        raise ConfigurationError(f"{where}: backoff must be 'full-jitter' (or give 'delays')")
    timeout = timedelta(seconds=_seconds(document.get("timeout", 10), f"{where}: timeout"))
    honor = document.get("honor_retry_after", True)
    if not isinstance(honor, bool):
        raise ConfigurationError(f"{where}: honor_retry_after must be true or false")
    table = document.get("classification", {})
    if not isinstance(table, Mapping):
        raise ConfigurationError(f"{where}: [classification] must be a table")
    attempts = document.get("max_attempts", 8)
    if isinstance(attempts, bool) or not isinstance(attempts, int):
        raise ConfigurationError(f"{where}: max_attempts must be a whole number")
    return Policy(
        name=name,
        backoff=backoff,
        max_attempts=attempts,
        timeout=timeout,
        lease_duration=max(timedelta(seconds=60), timeout * 2),
        profile=_profile(table, honor, where),
    )


def load_policy_file(path: str | Path) -> Policy:
    """Read and check the TOML policy file at ``path``."""
    location = Path(path)
    document = read_toml(location, "the policy file", ConfigurationError)
    return policy_from_mapping(document, name=str(location))
