"""Which refusal codes a platform relies on: refusal classes, the ``[answers]`` table, presets.

A broken guarantee (forged, stale or tampered input accepted; a 5xx, a hang or a 410 on bad
input) is always graded by the scenario's severity. The exact code of a refusal — 400 vs 401 vs
403 vs 422 — is a *convention*: ``should`` by default. A platform whose senders rely on particular
codes declares them per refusal class (``[answers]`` in the config, or a named preset such as
``stripe``); then answering another code is a ``must`` failure.

A status expectation is a refusal when every code it allows is one exact 4xx; its class comes from
the expectation's ``refusal`` argument or, by default, from what the steps sending its label did
to the request (a missing header, a bad signature, a timestamp outside the tolerance).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from conformance.exceptions import ConfigError
from conformance.model import Expectation, Scenario

__all__ = [
    "IN_FLIGHT",
    "PRESETS",
    "REFUSALS",
    "RETRY_LATER",
    "SIGNED_BAD_BODY",
    "UNSIGNED_ID",
    "Answers",
    "refusal_of",
    "resolve_answers",
]

Answers = tuple[tuple[str, tuple[int, ...]], ...]
"""Declared answers: ``((refusal class, codes), ...)``, hashable for the frozen settings."""

REFUSALS: Mapping[str, str] = {
    "missing_header": "a webhook header (id, timestamp or signature) is missing",
    "bad_signature": "the signature does not match (tampered body, unknown secret)",
    "stale_timestamp": "the signed timestamp is outside the tolerance (or replayed after it)",
    "in_flight": "a copy arrives while another copy of the same event is being handled",
    "unsigned_id": "an authentic delivery's unsigned event-id header (X-GitHub-Delivery) is broken",
    "signed_bad_body": "a correctly signed body is not UTF-8 or not JSON",
}
"""Every refusal class and what triggers it."""

IN_FLIGHT = "in_flight"
"""The refusal class of a copy that arrives while another copy is in flight: it may be answered
2xx (once the event is committed) or asked to come back later with one of
:data:`RETRY_LATER` — which of them is a convention."""

UNSIGNED_ID = "unsigned_id"
"""The refusal class of an authentic delivery whose unsigned id header is broken: it may be
accepted (the signature holds) or refused with a 4xx — which, is a convention."""

SIGNED_BAD_BODY = "signed_bad_body"
"""The refusal class of a correctly signed body that is not UTF-8 or not JSON: only the secret's
holder can send it, so it may be accepted (Go's encoding/json and Ruby's JSON take invalid UTF-8)
or refused with a 4xx — which, is a convention."""

RETRY_LATER: tuple[int, ...] = (409, 423, 425, 429, 503)
"""The answers that tell every sender to try an in-flight copy again later (409 Conflict,
423 Locked, 425 Too Early, 429 Too Many Requests, 503 Service Unavailable)."""

PRESETS: Mapping[str, Mapping[str, tuple[int, ...]]] = {
    "stripe": {
        "missing_header": (400,),
        "bad_signature": (400,),
        "stale_timestamp": (400,),
    },
    "hookproof": {
        "missing_header": (400,),
        "bad_signature": (401,),
        "stale_timestamp": (401,),
        "in_flight": (503,),
        "unsigned_id": (400,),
        "signed_bad_body": (400,),
    },
}
"""Named conventions: ``stripe`` (what Stripe's, Svix's and Standard Webhooks' samples answer:
400 to every refusal) and ``hookproof`` (the reference receiver's: 400 missing, 401 otherwise)."""

_EXACT_4XX = re.compile(r"^4\d\d$")


def _by_mutation(args: Mapping[str, Any]) -> str | None:
    mutation = str(args.get("mutation", "none"))
    if mutation.startswith("missing:"):
        return "missing_header"
    if mutation in ("tampered-body", "wrong-secret"):
        return "bad_signature"
    if any(int(args.get(key, 0)) for key in ("tolerances", "margins", "seconds")):
        return "stale_timestamp"
    return None


def refusal_of(scenario: Scenario, expectation: Expectation) -> str | None:
    """The refusal class a ``status`` expectation judges, or ``None`` when it judges no
    refusal code (a 2xx, a class such as ``4xx``, or a label no refusing step sends)."""
    if expectation.check != "status":
        return None
    explicit = expectation.args.get("refusal")
    if explicit is not None:
        return str(explicit)
    allowed = tuple(str(p) for p in expectation.args.get("allowed", ()))
    if not allowed or not all(_EXACT_4XX.match(p) for p in allowed):
        return None
    label = expectation.args.get("label")
    classes = {_by_mutation(s.args) for s in scenario.steps if s.args.get("label") == label} - {
        None
    }
    return classes.pop() if len(classes) == 1 else None


def _codes(value: Any, where: str, refusal: str) -> tuple[int, ...]:
    items = [value] if isinstance(value, int) and not isinstance(value, bool) else value
    if (
        not isinstance(items, list | tuple)
        or not items
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in items)
    ):
        raise ConfigError(f"{where} must be a status code or a list of status codes")
    if refusal == IN_FLIGHT:
        if not all(i in RETRY_LATER for i in items):
            known = ", ".join(str(code) for code in RETRY_LATER)
            raise ConfigError(f"{where}: an in-flight copy is asked back with {known}")
    elif not all(400 <= i < 500 and i != 410 for i in items):
        raise ConfigError(f"{where}: a refusal is a 4xx other than 410, got {list(items)}")
    return tuple(dict.fromkeys(int(i) for i in items))


def _preset(name: Any, where: str) -> dict[str, tuple[int, ...]]:
    if not isinstance(name, str) or name not in PRESETS:
        raise ConfigError(
            f"{where}: unknown answers preset {name!r}; choose {', '.join(sorted(PRESETS))}"
        )
    return dict(PRESETS[name])


def resolve_answers(value: str | Mapping[str, Any], where: str = "answers") -> Answers:
    """A preset name, or a table of refusal class → codes (``preset = NAME`` inside it starts
    from that preset), as declared answers. Every mistake is one :class:`ConfigError`."""
    if isinstance(value, str):
        table = _preset(value, where)
    elif isinstance(value, Mapping):
        table = _preset(value["preset"], f"{where}.preset") if "preset" in value else {}
        for key, codes in value.items():
            if key == "preset":
                continue
            refusal = key.replace("-", "_")
            if refusal not in REFUSALS:
                raise ConfigError(
                    f"unknown refusal class {key!r} in {where}; known: {', '.join(REFUSALS)}"
                )
            table[refusal] = _codes(codes, f"{where}.{key}", refusal)
    else:
        raise ConfigError(f"{where} must be a preset name or a table")
    return tuple(sorted(table.items()))
