"""The runner's new instruments: structure-aware bad input per scheme, signature lists, each
secret in turn, the real gap of every duplicate and ``--patience``, and ``--max-body``."""

from __future__ import annotations

import base64
import json
import random
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from conformance.config import CheckSettings, load_config
from conformance.exceptions import ConfigError, UsageError
from conformance.harnesses.exchanges import seconds_text
from conformance.harnesses.fuzz_cases import (
    body_cases,
    header_cases,
    odd_json_cases,
    repeated_cases,
    wrong_length_cases,
)
from conformance.harnesses.sender_steps import SenderDriver, TrackedEvent
from conformance.harnesses.signed_requests import WireScheme, padded, with_charset
from conformance.harnesses.state import RateLimiter, WireOptions, WireRun
from conformance.model import CASE_SENSITIVE_SIGNATURES
from conformance.payloads import UTF8_TEXT, PayloadFactory
from conformance.results import Outcome
from receiver.durations import parse_seconds
from receiver.exceptions import VerificationError
from receiver.signing import Secret, Verifier, scheme_named
from tests.conformance import broken_receivers
from tests.conformance.broken_receivers import (
    PROBE_TOKEN,
    SECOND_SECRET,
    plain_receiver,
)
from tests.conformance.support import SECRET, app_settings, run_in_process

SCHEMES = {"standard": SECRET, "stripe": "whsec_stripe_style", "github": "github-secret"}


def _genuine(scheme: str) -> tuple[WireScheme, dict[str, str], bytes]:
    """A genuine delivery's body and the scheme's own headers (a companion signature such as
    GitHub's SHA-1 is never fuzzed: the run sends it only beside a genuine own signature)."""
    wire = WireScheme(scheme, (Secret(SCHEMES[scheme]),))
    body = b'{"id":"evt_1","type":"ping"}'
    signed = wire.sign(body, event_id="evt_1", timestamp=1_700_000_000)
    companions = wire.scheme.companion_headers
    return wire, {k: v for k, v in signed.items() if k not in companions}, body


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_every_header_of_the_scheme_is_broken_by_some_case(scheme: str) -> None:
    """The signed headers' cases and the unsigned ones' (GitHub's delivery id, judged by
    signature.malformed-unsigned-id) together break every header, each case one header."""
    _, headers, body = _genuine(scheme)
    unsigned = scheme_named(scheme).unsigned_headers
    genuine = {k: v.encode("latin-1") for k, v in headers.items()}
    every: set[str] = set()
    for outside in (False, True):
        cases = header_cases(
            scheme, headers, body, 1_700_000_000, random.Random(1), unsigned=outside
        )
        broken = {n for case in cases for n in headers if case.headers[n] != genuine[n]}
        assert broken == {n for n in headers if (n in unsigned) is outside}
        every |= broken
        assert len({case.name for case in cases}) == len(cases)
        for case in cases:  # one header differs from the genuine request, the body never
            differing = [k for k in headers if case.headers[k] != genuine[k]]
            assert len(differing) == 1
            assert case.body == body
    assert every == set(headers)


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_the_signatures_to_redact_from_fuzzed_headers_are_the_schemes_own(scheme: str) -> None:
    """For every fuzzed signature header, the 5000-character junk included, the values to scrub
    are pieces of that header, and a value with no ``,`` or ``=`` carries none."""
    wire, headers, body = _genuine(scheme)
    cases = header_cases(scheme, headers, body, 1_700_000_000, random.Random(1))
    cases += wrong_length_cases(scheme, headers, body, 1_700_000_000, random.Random(1))
    for case in cases:
        decoded = {k: v.decode("latin-1") for k, v in case.headers.items()}
        raw = decoded.get(wire.signature_header, "")
        found = wire.signatures_of(decoded)
        assert all(value in raw for value in found)
        if "," not in raw and "=" not in raw:
            assert found == []
    (genuine,) = wire.signatures_of(headers)
    assert genuine in headers[wire.signature_header]


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_wrong_length_entries_are_well_formed_with_16_or_48_bytes(scheme: str) -> None:
    wire, headers, body = _genuine(scheme)
    cases = wrong_length_cases(scheme, headers, body, 1_700_000_000, random.Random(1))
    values = [case.headers[wire.signature_header].decode() for case in cases]
    if scheme == "standard":
        sizes = [len(base64.b64decode(v.removeprefix("v1,"), validate=True)) for v in values]
    else:
        sizes = [len(bytes.fromhex(v.rpartition("=")[2])) for v in values]
    assert sizes == [16, 48]


def test_bad_bodies_come_signed_and_unsigned() -> None:
    wire, headers, body = _genuine("standard")

    def sign(bad: bytes) -> dict[str, str]:
        return wire.sign(bad, event_id="evt_1", timestamp=1_700_000_000)

    for kind in ("not-utf8", "not-json", "not-ijson"):
        for signed in (False, True):
            cases = body_cases(headers, body, sign, kind=kind, signed=signed)
            assert cases
            assert {c.name.rpartition(":")[2] for c in cases} == {
                "signed" if signed else "unsigned"
            }
            genuine = headers["webhook-signature"].encode()
            kept = [c.headers["webhook-signature"] == genuine for c in cases]
            assert all(kept) is not signed
            assert any(kept) is not signed
    utf8 = body_cases(headers, body, sign, kind="not-utf8", signed=True)
    with pytest.raises(UnicodeDecodeError):
        utf8[0].body.decode("utf-8")


def test_lone_surrogate_bodies_are_the_event_s_own_json_and_hold_no_utf8_text() -> None:
    """Valid JSON by the grammar, the event's id kept (a Stripe-style body carries it), and a
    string that cannot be encoded: what a receiver storing it as UTF-8 text fails on."""
    wire, headers, body = _genuine("stripe")

    def sign(bad: bytes) -> dict[str, str]:
        return wire.sign(bad, event_id="evt_1", timestamp=1_700_000_000)

    cases = body_cases(headers, body, sign, kind="not-ijson", signed=True)
    documents = [json.loads(case.body) for case in cases]
    assert [d["id"] for d in documents] == ["evt_1", "evt_1"]
    assert [d["note"] for d in documents] == ["\ud83c", "\udfff"]
    for document in documents:
        with pytest.raises(UnicodeEncodeError):
            document["note"].encode("utf-8")


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        (b"application/json", b"application/json; charset=utf-8"),
        (None, b"application/json; charset=utf-8"),
        (b"application/json; charset=utf-8", b"application/json;charset=UTF-8"),
    ],
)
def test_the_charset_variant_adds_a_parameter_or_respells_the_one_there(
    given: bytes | None, sent: bytes
) -> None:
    assert with_charset(given) == sent


def test_the_nul_variant_sends_the_escape_and_the_utf8_variant_raw_text() -> None:
    factory = PayloadFactory()
    nul = factory.body("evt_1", variant="nul")
    assert b"\\u0000" in nul
    assert json.loads(nul)["note"] == "before\x00after"
    assert UTF8_TEXT.encode() in factory.body("evt_1", variant="utf8")


def test_the_empty_body_is_among_the_bodies_that_are_not_json() -> None:
    wire, headers, body = _genuine("standard")

    def sign(bad: bytes) -> dict[str, str]:
        return wire.sign(bad, event_id="evt_1", timestamp=1_700_000_000)

    for signed in (False, True):
        cases = body_cases(headers, body, sign, kind="not-json", signed=signed)
        assert [c.body for c in cases].count(b"") == 1


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_each_signed_header_is_repeated_with_another_value_first_and_last(scheme: str) -> None:
    _, headers, body = _genuine(scheme)
    cases = repeated_cases(
        scheme, headers, body, 1_700_000_000, random.Random(1), other_id="evt_other"
    )
    signed = {name for name in headers if name not in scheme_named(scheme).unsigned_headers}
    repeated: dict[str, list[str]] = {}
    for case in cases:
        names = [name for name, _ in case.lines]
        (twice,) = {name for name in names if names.count(name) == 2}
        values = [value.decode("latin-1") for name, value in case.lines if name == twice]
        assert headers[twice] in values
        assert len(set(values)) == 2
        assert sorted(set(names)) == sorted(headers)  # every other header once, as it was
        repeated.setdefault(twice, []).append(case.name.rpartition(":")[2])
        assert case.body == body
    assert set(repeated) == signed  # GitHub's unsigned delivery id is left alone
    assert all(sorted(orders) == ["other-first", "other-last"] for orders in repeated.values())
    if scheme == "standard":
        ids = {v for case in cases for n, v in case.lines if n == "webhook-id"}
        assert ids == {b"evt_1", b"evt_other"}


@pytest.mark.parametrize("position", ["first", "middle", "last"])
def test_the_valid_signature_is_placed_first_middle_or_last(position: str) -> None:
    wire, headers, body = _genuine("standard")
    listed = wire.listed(
        headers,
        position=position,
        body=body,
        event_id="evt_1",
        timestamp=1_700_000_000,
        rng=random.Random(3),
    )
    entries = listed["webhook-signature"].split(" ")
    assert len(entries) == 3
    assert (
        entries.index(headers["webhook-signature"])
        == {"first": 0, "middle": 1, "last": 2}[position]
    )
    assert sorted(e.split(",")[0] for e in entries) == ["v1", "v1", "v2"]


def test_padding_keeps_valid_json_well_past_the_size() -> None:
    import json

    grown = padded(b'{"a": 1}', 10_000)
    assert len(grown) >= 10_000
    assert json.loads(grown)["a"] == 1


def test_every_family_signs_with_each_secret_in_turn() -> None:
    wire = WireScheme("standard", (Secret(SECRET), Secret(SECOND_SECRET)))
    options = WireOptions(url="http://x/webhooks", scheme=wire)
    for scenario in ("signature.valid", "idempotency.sequential-duplicate"):
        run = WireRun(options, httpx.AsyncClient(), RateLimiter(None), random.Random(1), scenario)
        used = [run.next_secret().value for _ in range(4)]
        assert set(used) == {SECRET, SECOND_SECRET}
        assert used[0] != used[1]


def test_the_real_gap_of_every_duplicate_is_reported() -> None:
    app = plain_receiver((SECRET, SECOND_SECRET))
    settings = app_settings(
        PROBE_TOKEN,
        secrets=(SECRET, SECOND_SECRET),
        patience=0.05,
        select=("idempotency.late-duplicate", "signature.each-secret"),
    )
    results = run_in_process(app, settings)
    assert {r.outcome for r in results.values()} == {Outcome.PASSED}
    late = results["idempotency.late-duplicate"].message
    assert late.startswith("1 duplicate sent ")
    assert late.endswith(" ms after the first copy (real time)")
    gap_ms = float(late.removeprefix("1 duplicate sent ").split(" ")[0])
    assert gap_ms >= 50
    assert results["signature.each-secret"].message == ""


def test_the_run_itself_passes_between_a_late_duplicate_and_its_first_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The late duplicate's first copy goes before the first scenario and the scenario itself
    runs last (after the response.* scenarios the catalogue lists after it too): with no
    patience at all, a dedupe record that expires (here after 10 ms) is caught when the other
    scenarios take longer than that, and the gap reported is at least all of their time."""
    monkeypatch.setattr(broken_receivers, "DEDUPE_EXPIRY_S", 0.01)
    app = plain_receiver((SECRET,), bugs=frozenset({"dedupe-expires"}))
    settings = app_settings(
        PROBE_TOKEN,
        patience=0,
        select=("signature.*", "idempotency.late-duplicate", "response.*"),
    )
    results = run_in_process(app, settings)
    assert list(results)[-1] == "idempotency.late-duplicate"  # response.* ran before it
    before = sum(r.duration_s for sid, r in results.items() if not sid.startswith("idem"))
    assert before > broken_receivers.DEDUPE_EXPIRY_S  # else it proves nothing: run more before
    late = results["idempotency.late-duplicate"]
    assert late.outcome is Outcome.FAILED, late.message
    gap_s = float(late.message.removeprefix("1 duplicate sent ").split(" ")[0])
    unit = late.message.removeprefix("1 duplicate sent ").split(" ")[1]
    assert (gap_s / 1000 if unit == "ms" else gap_s) >= before


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.0004, "<1 ms"), (0.012, "12 ms"), (1.04, "1.0 s"), (7200, "2.0 h")]
)
def test_gaps_read_in_the_unit_that_fits(seconds: float, text: str) -> None:
    assert seconds_text(seconds) == text


def test_a_receiver_holding_only_the_first_secret_fails_the_second_one() -> None:
    app = plain_receiver((SECRET,))
    results = run_in_process(
        app,
        app_settings(
            PROBE_TOKEN, secrets=(SECRET, SECOND_SECRET), select=("signature.each-secret",)
        ),
    )
    result = results["signature.each-secret"]
    assert result.outcome is Outcome.FAILED
    assert "401" in result.failures[0].observed


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("1.5s", 1.5),
        ("250ms", 0.25),
        ("10m", 600.0),
        ("2h", 7200.0),
        ("1d", 86400.0),
        ("1h30m", 5400.0),
    ],
)
def test_durations_read_as_people_write_them(text: str, seconds: float) -> None:
    assert parse_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "-1s", "5 days", "1h 30m", "30m1h"])
def test_a_bad_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_seconds(text)


def test_patience_and_max_body_from_flags_and_config(tmp_path: Path) -> None:
    from conformance.commands.check import check_command

    (tmp_path / "hookproof.toml").write_text("patience = 30\nmax_body = 2048\n")
    assert load_config(cwd=tmp_path) == {"patience": 30, "max_body": 2048}
    assert CheckSettings().patience == 1.0
    with pytest.raises(UsageError, match="--patience"):
        CheckSettings(url="http://x/", secrets=("s",), patience=-1).validate()
    result = CliRunner().invoke(
        check_command, ["http://127.0.0.1:9/", "--secret", SECRET, "--patience", "soon"]
    )
    assert result.exit_code == 2
    assert "not a duration" in result.output


def test_every_time_option_and_config_key_takes_a_duration(tmp_path: Path) -> None:
    """--timeout, --max-time, --wait-for-endpoint and --patience read the one grammar of
    receiver.durations, and so do their config keys; a bad one names its key."""
    from conformance.commands.check import check_command

    (tmp_path / "hookproof.toml").write_text(
        'timeout = "250ms"\nmax_time = "10m"\nwait_for_endpoint = "1m30s"\npatience = "1d"\n'
    )
    assert load_config(cwd=tmp_path) == {
        "timeout": 0.25,
        "max_time": 600.0,
        "wait_for_endpoint": 90.0,
        "patience": 86400.0,
    }
    (tmp_path / "hookproof.toml").write_text('patience = "soon"\n')
    with pytest.raises(ConfigError, match=r"'patience'.*not a duration"):
        load_config(cwd=tmp_path)
    result = CliRunner().invoke(
        check_command,
        ["http://127.0.0.1:9/", "--secret", SECRET, "--timeout", "0s", "--max-time", "5m"],
    )
    assert result.exit_code == 2
    assert "'0s' must be more than 0" in result.output


def test_without_a_declared_limit_the_size_scenario_is_skipped_saying_why() -> None:
    results = run_in_process(
        plain_receiver(SECRET), app_settings(PROBE_TOKEN, select=("size.over-limit",))
    )
    result = results["size.over-limit"]
    assert result.outcome is Outcome.SKIPPED
    assert "--max-body" in result.message


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_a_case_swapped_signature_is_other_bytes_only_where_the_encoding_has_case(
    scheme: str,
) -> None:
    """signature.case-swapped's value: the genuine header with its signature text's letters in
    the other case; under base64 other bytes (refused), under hex the same bytes (so the
    scenario is not run there: comparing hex either way is right)."""
    wire, headers, body = _genuine(scheme)
    name = wire.signature_header
    swapped = wire.case_swapped(body, event_id="evt_1", timestamp=1_700_000_000)
    assert swapped != headers[name]
    assert swapped.lower() == headers[name].lower()
    verifier = Verifier(list(wire.secrets), scheme=wire.scheme)
    forged = {**headers, name: swapped}
    if scheme in CASE_SENSITIVE_SIGNATURES:
        with pytest.raises(VerificationError):
            verifier.verify(body, forged, now=1_700_000_000)
    else:
        assert verifier.verify(body, forged, now=1_700_000_000).event_id
    assert {"standard", "svix"} == CASE_SENSITIVE_SIGNATURES  # base64; stripe and github: hex


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_odd_json_cases_parse_are_no_event_and_none_is_authentic(scheme: str) -> None:
    """signature.body-odd-json's bodies: each parses as JSON (the nested one past Python's
    recursion limit, where ``json.loads`` raises ``RecursionError``, not ``ValueError``), none
    is a JSON object with a string ``type``, all fit a 4 KiB body limit, and each carries the
    genuine body's headers, so every one fails verification under the scheme."""
    wire, headers, _ = _genuine(scheme)
    cases = odd_json_cases(headers)
    assert len({case.body for case in cases}) == len(cases) == 7
    verifier = Verifier(list(wire.secrets), scheme=wire.scheme)
    nested = 0
    for case in cases:
        assert len(case.body) <= 4096, case.name
        assert case.name.endswith(":unsigned")
        sent = {k: v.decode("latin-1") for k, v in case.headers.items()}
        assert sent == headers
        with pytest.raises(VerificationError):
            verifier.verify(case.body, sent, now=1_700_000_000)
        try:
            document = json.loads(case.body)
        except RecursionError:
            nested += 1
            continue
        assert not (isinstance(document, dict) and isinstance(document.get("type"), str))
    assert nested == 1


def test_a_redrive_copy_comes_after_the_whole_run_and_waits_only_what_patience_has_left() -> None:
    """The first attempt of the event the sender redrives goes before the first scenario (its
    steps are marked early) and the scenario runs last: the redrive copy's gap is the run's
    length, and ``--patience`` counts from that first attempt, not from the redrive."""
    app = plain_receiver((SECRET,))
    settings = app_settings(
        PROBE_TOKEN,
        patience=0.3,
        select=("signature.*", "idempotency.redrive-duplicate", "response.*"),
    )
    results = run_in_process(app, settings)
    assert list(results)[-1] == "idempotency.redrive-duplicate"
    redrive = results["idempotency.redrive-duplicate"]
    assert redrive.outcome is Outcome.PASSED, redrive.failures
    others = sum(r.duration_s for sid, r in results.items() if sid != redrive.scenario.id)
    said = redrive.message.removeprefix("1 duplicate sent ").split(" ")
    gap_s = float(said[0]) / (1000 if said[1] == "ms" else 1)
    assert gap_s >= max(others, 0.3)  # the run, and at least the patience, in between


def test_patience_counts_from_the_first_attempt() -> None:
    driver = SenderDriver(
        transport=None,  # type: ignore[arg-type]
        url="http://127.0.0.1:9/webhooks",
        scheme="standard",
        secrets=(SECRET,),
        make_body=lambda eid, ref, variant: b"{}",
        new_event_id=lambda: "evt_1",
        seed=1,
        virtual_wire_clock=False,
        patience_s=2.0,
    )
    never = TrackedEvent("a", "evt_1", "dlv_evt_1", b"{}")
    assert driver.patience_left(never) == 2.0
    long_ago = TrackedEvent("b", "evt_2", "dlv_evt_2", b"{}", first_attempt_at=0.0)
    assert driver.patience_left(long_ago) == 0.0
    just_now = TrackedEvent("c", "evt_3", "dlv_evt_3", b"{}")
    just_now.first_attempt_at = time.perf_counter() - 0.5
    assert 1.0 < driver.patience_left(just_now) <= 1.5
