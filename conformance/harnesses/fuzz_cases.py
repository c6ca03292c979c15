"""Structure-aware bad input: for each scheme, every header's grammar broken one way at a time,
wrong lengths and encodings, well-formed entries of the wrong length, and bodies that are not
UTF-8 or not JSON (signed and unsigned).

The driver is generic: each scheme object says what its headers are, the role each carries and
the broken shapes of its grammar (``broken_headers``), and how a signature of any length is
written (``signature_with``); this module adds the junk every header of a role gets.

Every case is one no genuine sender produces *and* from which no lenient parser can recover the
genuine signature: values are garbage, signatures of the wrong length or of another key, or the
signed content is changed. So the one right answer to each is a 4xx (never a 5xx, never applied),
whatever the receiver's parser tolerates. Cases are data — a name and the request's headers and
body — built by :func:`header_cases`, :func:`wrong_length_cases` and :func:`body_cases`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from receiver.signing import NON_ASCII_DIGITS, random_bytes, scheme_named

__all__ = [
    "FuzzCase",
    "Signer",
    "body_cases",
    "header_cases",
    "wrong_length_cases",
]

Signer = Callable[[bytes], dict[str, str]]
"""Signs a body with the run's secret and the event's id and timestamp: the genuine headers."""

LONG = 5000
ARABIC_DIGITS = NON_ASCII_DIGITS  # Python's int() accepts them; the signed text does not match
NOT_UTF8 = b'{"type":"hookproof.conformance.ping","data":{"note":"\xff\xfe\xc3\x28"}}'
NOT_JSON = b"type=hookproof.conformance.ping&data=not+json"
TRUNCATED = b'{"type": "hookproof.conformance.ping", "data": '


@dataclass(frozen=True)
class FuzzCase:
    """One bad request: what it breaks (``name``), its headers and its body, exactly as sent."""

    name: str
    headers: Mapping[str, bytes]
    body: bytes


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
    scheme: str, headers: Mapping[str, str], body: bytes, timestamp: int, rng: random.Random
) -> list[FuzzCase]:
    """Every header of ``headers`` (the genuine ones) replaced, one at a time, by each broken
    value of its grammar; the body is the genuine one."""
    genuine = {k: v.encode("latin-1") for k, v in headers.items()}
    cases = []
    for name, values in _grammar(scheme, timestamp, rng).items():
        if name not in genuine:
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


def body_cases(
    headers: Mapping[str, str], body: bytes, sign: Signer, *, kind: str
) -> list[FuzzCase]:
    """Bodies that are not UTF-8 (``kind="not-utf8"``) or not JSON (``kind="not-json"``), each
    once correctly signed and once under the genuine body's signature."""
    genuine = {k: v.encode("latin-1") for k, v in headers.items()}
    bodies = [NOT_UTF8, b"\xff" + body] if kind == "not-utf8" else [NOT_JSON, TRUNCATED]
    cases = []
    for index, bad in enumerate(bodies):
        signed = {k: v.encode("latin-1") for k, v in sign(bad).items()}
        cases.append(FuzzCase(f"{kind}#{index}:signed", {**genuine, **signed}, bad))
        cases.append(FuzzCase(f"{kind}#{index}:unsigned", genuine, bad))
    return cases
