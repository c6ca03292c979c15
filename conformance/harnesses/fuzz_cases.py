"""Structure-aware bad input: for each scheme, every header's grammar broken one way at a time,
wrong lengths and encodings, well-formed entries of the wrong length, bodies that are not
UTF-8, not JSON or not I-JSON (signed and unsigned, the empty body included), unsigned JSON of
a shape or depth no event has, and each webhook header repeated with a second, different value.

The driver is generic: each scheme object says what its headers are, the role each carries and
the broken shapes of its grammar (``broken_headers``), and how a signature of any length is
written (``signature_with``); this module adds the junk every header of a role gets.

Every case is one no genuine sender produces *and* from which no lenient parser can recover the
genuine signature: values are garbage, signatures of the wrong length or of another key, or the
signed content is changed. So the one right answer to each is a 4xx (never a 5xx, never applied),
whatever the receiver's parser tolerates. Two kinds of case are the exceptions. A correctly
signed body that is not UTF-8, not JSON or not I-JSON came from the secret's holder, so
accepting it breaks no guarantee (refusing one that is not UTF-8 or not JSON is the
convention, ``signed_bad_body``; either answer to a lone surrogate is right). And a repeated
header: the genuine copy was already delivered, so a receiver that reads one of the values and
recognises the duplicate keeps every guarantee; the must is that no second effect appears under
the genuine id and that nothing answers 5xx.

Cases are data — a name and the request's headers and body — built by :func:`header_cases`,
:func:`wrong_length_cases`, :func:`truncated_cases`, :func:`case_swapped_cases`,
:func:`body_cases`, :func:`odd_json_cases` and :func:`repeated_cases`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from conformance.payloads import with_note
from receiver.signing import NON_ASCII_DIGITS, random_bytes, scheme_named

__all__ = [
    "FuzzCase",
    "Signer",
    "body_cases",
    "case_swapped_cases",
    "header_cases",
    "odd_json_cases",
    "repeated_cases",
    "wrong_length_cases",
]

Signer = Callable[[bytes], dict[str, str]]
"""Signs a body with the run's secret and the event's id and timestamp: the genuine headers."""

LONG = 5000
ARABIC_DIGITS = NON_ASCII_DIGITS  # Python's int() accepts them; the signed text does not match
NOT_UTF8 = b'{"type":"hookproof.conformance.ping","data":{"note":"\xff\xfe\xc3\x28"}}'
NOT_JSON = b"type=hookproof.conformance.ping&data=not+json"
TRUNCATED = b'{"type": "hookproof.conformance.ping", "data": '
LONE_SURROGATES = ("\ud83c", "\udfff")
"""Halves of a surrogate pair (a high one, a low one), each alone: JSON by RFC 8259's grammar as
``\\uXXXX`` escapes, but not I-JSON, and strings no UTF-8 text (nor a database's text column)
can hold."""
NESTING = 2000
"""How deep the nested case goes: past Python's recursion limit (``json.loads`` raises
``RecursionError``, not the ``ValueError`` a parse guard catches) and Jackson's default of 1000,
in 4,000 bytes (within a small declared body limit)."""
ODD_JSON: Mapping[str, bytes] = {
    "null": b"null",
    "list": b"[]",
    "string": b'"hookproof.conformance.ping"',
    "number": b"0",
    "empty-object": b"{}",
    "wrong-types": b'{"id":{},"type":[],"created_at":true,"data":null,"account":7}',
    f"lists-{NESTING}-deep": b"[" * NESTING + b"]" * NESTING,
}
"""JSON that parses, but is no event: what ``payload["type"]``, ``payload.data.tenant`` or a
recursive parser trips on when it reads the body before verifying it."""


@dataclass(frozen=True)
class FuzzCase:
    """One bad request: what it breaks (``name``), its headers and its body, exactly as sent."""

    name: str
    headers: Mapping[str, bytes]
    body: bytes
    lines: tuple[tuple[str, bytes], ...] = ()
    """The exact header lines, where they cannot be a mapping (a repeated header); else
    ``headers`` is sent as it is."""

    def wire(self) -> tuple[tuple[str, bytes], ...]:
        """The header lines as sent."""
        return self.lines or tuple(self.headers.items())


JUNK: Mapping[str, tuple[bytes, ...]] = {
    "id": (b"", b"\xc3\xa9\xe9", b"x" * LONG),
    "timestamp": (b"", b"-1", b"1e9", b"12.5", b"0x10", b"9" * 40, b"abc", ARABIC_DIGITS),
    "signature": (b"", b",", b"=", b'"quoted"', b"null", b"%00", b"\xc3\xa9\xe9", b"a" * LONG),
}
"""What every header of a role gets, whatever the scheme (before the scheme's own shapes)."""


def _grammar(scheme: str, timestamp: int, rng: random.Random) -> dict[str, list[bytes]]:
    """Per header of ``scheme``, the broken values of its grammar: the junk of the header's role,
    then the scheme's own broken shapes (:meth:`receiver.signing.Scheme.broken_headers`)."""
    return {
        broken.name: [*JUNK[broken.role], *broken.values]
        for broken in scheme_named(scheme).broken_headers(timestamp=timestamp, rng=rng)
    }


def header_cases(
    scheme: str,
    headers: Mapping[str, str],
    body: bytes,
    timestamp: int,
    rng: random.Random,
    *,
    unsigned: bool = False,
) -> list[FuzzCase]:
    """Every header of ``headers`` (the genuine ones) the signature covers replaced, one at a
    time, by each broken value of its grammar; the body is the genuine one. With ``unsigned``,
    the headers it does not cover instead (GitHub's ``X-GitHub-Delivery``): the delivery stays
    authentic, so refusing it is a convention, and only a 5xx breaks a guarantee."""
    genuine = {k: v.encode("latin-1") for k, v in headers.items()}
    outside = scheme_named(scheme).unsigned_headers
    cases = []
    for name, values in _grammar(scheme, timestamp, rng).items():
        if name not in genuine or (name in outside) is not unsigned:
            continue
        for index, value in enumerate(values):
            cases.append(FuzzCase(f"{name}#{index}", {**genuine, name: value}, body))
    return cases


def wrong_length_cases(
    scheme: str, headers: Mapping[str, str], body: bytes, timestamp: int, rng: random.Random
) -> list[FuzzCase]:
    """Well-formed signature entries whose value is 16 or 48 bytes instead of 32: what makes
    ``crypto.timingSafeEqual`` throw and a length-unaware comparison crash."""
    genuine = {k: v.encode("latin-1") for k, v in headers.items()}
    signing = scheme_named(scheme)
    name = signing.signature_header
    cases = []
    for size in (16, 48):
        value = signing.signature_with(random_bytes(rng, size), timestamp=timestamp).encode()
        cases.append(FuzzCase(f"{name}:{size}-bytes", {**genuine, name: value}, body))
    return cases


TRUNCATED_BYTES = (3, 30)
"""How much of the genuine 32-byte signature a truncated one keeps: multiples of 3, so the
truncated value is a prefix of the genuine one's text in base64 as in hex."""


def truncated_cases(
    headers: Mapping[str, str], body: bytes, name: str, truncated: Callable[[int], str]
) -> list[FuzzCase]:
    """The genuine request whose ``name`` header carries only a prefix of its own signature
    (``truncated(n)``: the first ``n`` bytes): what a prefix comparison (``startsWith``,
    ``strncmp`` over the given length, a loop over the shorter of two) accepts."""
    genuine = {k: v.encode("latin-1") for k, v in headers.items()}
    return [
        FuzzCase(f"{name}:first-{keep}-bytes", {**genuine, name: truncated(keep).encode()}, body)
        for keep in TRUNCATED_BYTES
    ]


def case_swapped_cases(
    headers: Mapping[str, str], body: bytes, name: str, swapped: str
) -> list[FuzzCase]:
    """The genuine request whose ``name`` header carries its own signature with every letter in
    the other case (``swapped``)."""
    genuine = {k: v.encode("latin-1") for k, v in headers.items()}
    return [FuzzCase(f"{name}:case-swapped", {**genuine, name: swapped.encode()}, body)]


def _bad_bodies(kind: str, body: bytes) -> list[bytes]:
    if kind == "not-utf8":
        return [NOT_UTF8, b"\xff" + body]
    if kind == "not-ijson":
        document = json.loads(body)  # the event's own JSON: it keeps the id a body may carry
        return [
            json.dumps(with_note(document, half), separators=(",", ":")).encode()
            for half in LONE_SURROGATES
        ]
    return [NOT_JSON, TRUNCATED, b""]


def body_cases(
    headers: Mapping[str, str], body: bytes, sign: Signer, *, kind: str, signed: bool
) -> list[FuzzCase]:
    """Bodies that are not UTF-8 (``kind="not-utf8"``), not JSON (``kind="not-json"``) or not
    I-JSON (``kind="not-ijson"``: a lone surrogate escape), correctly signed (``signed``) or
    under the genuine body's signature."""
    genuine = {k: v.encode("latin-1") for k, v in headers.items()}
    bodies = _bad_bodies(kind, body)
    if not signed:
        return [FuzzCase(f"{kind}#{i}:unsigned", genuine, bad) for i, bad in enumerate(bodies)]
    return [
        FuzzCase(
            f"{kind}#{i}:signed",
            {**genuine, **{k: v.encode("latin-1") for k, v in sign(bad).items()}},
            bad,
        )
        for i, bad in enumerate(bodies)
    ]


def odd_json_cases(headers: Mapping[str, str]) -> list[FuzzCase]:
    """The genuine headers over a body of :data:`ODD_JSON` instead of the genuine one: the
    signature does not match, so each is refused — by a receiver that verifies before it reads
    the body, or that reads it defensively."""
    genuine = {k: v.encode("latin-1") for k, v in headers.items()}
    return [FuzzCase(f"odd-json:{name}:unsigned", genuine, bad) for name, bad in ODD_JSON.items()]


def repeated_cases(
    scheme: str,
    headers: Mapping[str, str],
    body: bytes,
    timestamp: int,
    rng: random.Random,
    *,
    other_id: str,
) -> list[FuzzCase]:
    """The genuine request with one webhook header sent twice: the genuine value and another
    (``other_id`` for the id, a second later for the timestamp, another key's signature), the
    other one first and then last. A receiver that verifies one value and deduplicates on the
    other applies a replay twice. Headers the scheme does not sign (GitHub's delivery id) are
    left alone: any value of theirs can be replayed without repeating them."""
    genuine = {k: v.encode("latin-1") for k, v in headers.items()}
    signing = scheme_named(scheme)
    others = {
        "id": other_id.encode(),
        "timestamp": str(timestamp + 1).encode(),
        "signature": signing.signature_with(random_bytes(rng, 32), timestamp=timestamp).encode(),
    }
    cases = []
    for broken in signing.broken_headers(timestamp=timestamp, rng=rng):
        name, other = broken.name, others.get(broken.role)
        unsigned = name in signing.unsigned_headers
        if name not in genuine or unsigned or other is None or other == genuine[name]:
            continue
        rest = tuple((k, v) for k, v in genuine.items() if k != name)
        for order, pair in (
            ("other-first", (other, genuine[name])),
            ("other-last", (genuine[name], other)),
        ):
            lines = (*rest, *((name, value) for value in pair))
            cases.append(FuzzCase(f"{name}:repeated:{order}", genuine, body, lines))
    return cases
