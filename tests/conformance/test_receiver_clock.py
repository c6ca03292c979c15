"""The receiver's clock as its Date header tells it: an offset beyond half the margin and under
half the tolerance is followed by every signed timestamp (the clock edges are then tested on the
receiver's clock, not failed for the runner's), a larger one is only reported."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from email.utils import formatdate

import pytest

from conformance import receiver_clock
from conformance.cli import main
from conformance.receiver_clock import ClockOffset, offset_from_date
from receiver.app import ReceiverSettings, create_app
from receiver.server import running_server
from tests.conformance.broken_receivers import PROBE_TOKEN
from tests.conformance.support import SECRET


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("clock") / "inbox.sqlite"
    app = create_app(ReceiverSettings(secrets=[SECRET], db=str(db), probe_token=PROBE_TOKEN))
    with running_server(app) as base:
        yield base


def test_the_offset_is_read_from_an_http_date_to_the_second() -> None:
    now = time.time()
    ahead = offset_from_date(formatdate(now + 60, usegmt=True), now)
    assert ahead is not None
    assert 59 <= ahead <= 61
    behind = offset_from_date(formatdate(now - 30, usegmt=True), now)
    assert behind is not None
    assert -31 <= behind <= -29
    for junk in (None, "", "yesterday", "Mon, 99 Foo 2026 99:99:99 GMT", "2026-12-03 10:00:00"):
        assert offset_from_date(junk, now) is None


@pytest.mark.parametrize(
    ("seen", "followed"),
    [(None, 0), (0.4, 0), (-5.0, 0), (5.6, 6), (-60.2, -60), (149.0, 149), (150.0, 0), (-900, 0)],
)
def test_only_an_offset_beyond_half_the_margin_and_under_half_the_tolerance_is_followed(
    seen: float | None, followed: int
) -> None:
    assert ClockOffset.judge(seen, margin=10, tolerance=300).followed == followed


def _check_clock_family(base: str) -> int:
    argv = ["check", f"{base}/webhooks", "--secret", SECRET, "--select", "clock"]
    return main([*argv, "--probe", f"{base}/_hookproof/events", "--probe-token", PROBE_TOKEN])


def test_a_runner_whose_clock_lags_follows_the_receivers_and_says_so(
    reference: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """This machine's clock 60 s behind the receiver's: without following the Date header,
    every "just inside the past tolerance" timestamp would be 50 s outside it to the receiver."""
    monkeypatch.setattr(receiver_clock, "local_now", lambda: time.time() - 60)
    code = _check_clock_family(reference)
    out = capsys.readouterr().out
    # the Date header is to the second: 59, 60 or 61 s
    assert re.search(r"note: the receiver's clock is (59|60|61) s ahead of this machine's", out)
    assert "signed timestamps follow it" in out
    assert "FAILED" not in out
    assert code == 0


def test_a_clock_half_the_tolerance_away_is_reported_not_followed(
    reference: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """200 s apart: a real sender's fresh deliveries are near the limit too, so the run shows
    what the receiver does with them instead of hiding it; the note explains the failures."""
    monkeypatch.setattr(receiver_clock, "local_now", lambda: time.time() - 200)
    code = _check_clock_family(reference)
    out = capsys.readouterr().out
    assert re.search(r"the receiver's clock is (199|200|201) s ahead", out)
    assert "not followed" in out
    assert "FAILED  clock.past-inside" in out
    assert code == 1
