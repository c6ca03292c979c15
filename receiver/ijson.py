"""The payload rules: a delivery's body must be I-JSON (RFC 7493), checked once after verification.

:func:`parse_payload` parses the verified bytes exactly once and refuses, as a 400 problem:

* a body that is empty, not UTF-8 or not JSON (RFC 8259) —
  :class:`~receiver.exceptions.InvalidPayload` (``invalid-payload``), nesting too deep or an
  integer too long to convert included;
* JSON that is not I-JSON — :class:`~receiver.exceptions.PayloadNotIJson` (``payload-not-i-json``):
  a string (or member name) holding a lone surrogate escape such as ``"\\udfff"`` (it cannot be
  encoded as UTF-8, so any handler storing it would fail on every retry), the non-finite numbers
  ``NaN``/``Infinity``/``-Infinity`` or a number that overflows to one (``1e400``), and an object
  with the same member name twice (different parsers keep different copies).

A scheme that must read the body to verify it (the Stripe-style event id) parses it once with
:func:`parse_leniently`: the same strict parse, but an I-JSON violation is noted in the
:class:`ParsedPayload` instead of raised, so the middleware's payload check reuses that one parse
(and a middleware told not to check payloads still accepts the body).

The cheap cases stay cheap: lone surrogates can only arrive as ``\\uD800``-``\\uDFFF`` escapes
(strict UTF-8 decoding refuses them as raw bytes), so the parsed document is only walked for them
when the raw body holds such an escape.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from receiver.exceptions import InvalidPayload, PayloadNotIJson

__all__ = ["ParsedPayload", "parse_leniently", "parse_payload"]

_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")


class _Refused(ValueError):
    """Raised from inside the parser's hooks; carries the I-JSON rule that was broken."""


def _refuse_constant(name: str) -> Any:
    raise _Refused(f"the non-finite number {name} is not allowed")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Refused(f"the number {text[:32]} is outside the range of a double")
    return value


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise _Refused(f"the member name {name[:64]!r} appears twice in one object")
            seen.add(name)
    return document


_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_unique_members,
    parse_constant=_refuse_constant,
    parse_float=_finite_float,
)


_SCAN: Final[Callable[[str, int], tuple[Any, int]]] = _DECODER.scan_once  # type: ignore[attr-defined]
_BLANK_RUN: Final = re.compile(r"[ \t\n\r]*")  # JSON's whitespace; always matches
_BLANKS: Final = frozenset(" \t\n\r")


def _blanks_end(text: str, at: int) -> int:
    match = _BLANK_RUN.match(text, at)
    assert match is not None  # a run of zero blanks matches too
    return match.end()


def _decode(text: str) -> Any:
    """``_DECODER.decode(text)`` without its Python wrapper's two whitespace matches on the
    usual body (no blank before or after the document): the same scanner, the same errors."""
    start = _blanks_end(text, 0) if text[:1] in _BLANKS else 0
    try:
        document, end = _SCAN(text, start)
    except StopIteration as stop:
        raise json.JSONDecodeError("Expecting value", text, stop.value) from None
    if end != len(text) and _blanks_end(text, end) != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return document


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def parse_payload(body: bytes) -> Any:
    """The body as a JSON document, or :class:`InvalidPayload` / :class:`PayloadNotIJson`."""
    if not body:
        raise InvalidPayload("the body is empty")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidPayload("the body is not UTF-8") from None
    try:
        document = _decode(text)
    except _Refused as error:
        raise PayloadNotIJson(str(error)) from None
    except (ValueError, RecursionError):  # JSONDecodeError, or an integer beyond int_max_str_digits
        raise InvalidPayload("the body is not JSON") from None
    if _SURROGATE_ESCAPE.search(body) is not None and _has_lone_surrogate(document):
        raise PayloadNotIJson("a string holds a lone surrogate escape (not encodable as UTF-8)")
    return document


@dataclass(frozen=True, slots=True)
class ParsedPayload:
    """A body parsed once: the document, and why it is not I-JSON (``None`` when it is)."""

    document: Any
    refusal: str | None = None

    def checked(self) -> Any:
        """The document, or :class:`PayloadNotIJson` when it broke an I-JSON rule."""
        if self.refusal is not None:
            raise PayloadNotIJson(self.refusal)
        return self.document


def parse_leniently(body: bytes) -> ParsedPayload:
    """:func:`parse_payload`, but an I-JSON violation is kept in the result, not raised (the
    document is then the plain JSON parse: only such bodies are parsed twice)."""
    try:
        return ParsedPayload(parse_payload(body))
    except PayloadNotIJson as refusal:
        return ParsedPayload(json.loads(body), str(refusal))
