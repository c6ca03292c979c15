"""Ctrl-C during a run (:mod:`conformance.interrupts`): the run ends as ``interrupted``, its
reports hold what finished, and ``hookproof check`` exits 130 with one line on stderr."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from conformance.catalogue import CATALOGUE
from conformance.interrupts import INTERRUPT_MESSAGE, is_interrupt, run_interruptibly
from conformance.model import Harness
from receiver.server import running_server
from tests.conformance.support import SECRET
from tests.support.processes import hookproof_argv

pytestmark = pytest.mark.skipif(os.name != "posix", reason="Ctrl-C is a POSIX signal here")


def test_ctrl_c_cancels_the_run_as_an_interrupt_then_stops_the_caller() -> None:
    seen: list[bool] = []

    async def run() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        try:
            await asyncio.Event().wait()  # only the interrupt ends this
        except asyncio.CancelledError as stop:
            seen.append(is_interrupt(stop))
            raise

    with pytest.raises(KeyboardInterrupt):
        run_interruptibly(run())
    assert seen == [True]


def test_another_cancellation_is_not_an_interrupt() -> None:
    assert is_interrupt(asyncio.CancelledError(INTERRUPT_MESSAGE))
    assert not is_interrupt(asyncio.CancelledError())
    assert not is_interrupt(asyncio.CancelledError("shutting down"))
    assert is_interrupt(KeyboardInterrupt())


def test_a_run_that_is_not_interrupted_gives_its_result() -> None:
    async def run() -> int:
        return 7

    assert run_interruptibly(run()) == 7


class _Stalling:
    """A receiver that answers the first ``answered`` webhooks 200, then holds the next one
    until the test lets go (or a bound passes), saying when it holds one."""

    def __init__(self, answered: int) -> None:
        self.answered = answered
        self.seen = 0
        self.holding = threading.Event()
        self.release = threading.Event()

    async def webhook(self, request: Request) -> Response:
        await request.body()
        self.seen += 1
        if self.seen > self.answered:
            self.holding.set()
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, self.release.wait, 20)  # bounded
        return JSONResponse({"ok": True})


@pytest.fixture
def stalling() -> Iterator[tuple[str, _Stalling]]:
    receiver = _Stalling(answered=6)
    app = Starlette(routes=[Route("/webhooks", receiver.webhook, methods=["POST"])])
    with running_server(app) as base:
        try:
            yield base, receiver
        finally:
            receiver.release.set()


def test_ctrl_c_during_check_writes_the_reports_and_exits_130(
    stalling: tuple[str, _Stalling], tmp_path: Path
) -> None:
    base, receiver = stalling
    report = tmp_path / "report.json"
    argv = hookproof_argv(
        "check", f"{base}/webhooks", "--secret", SECRET, "--json", str(report),
        "--patience", "0", "--timeout", "15",
    )  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        assert receiver.holding.wait(30), "the check never reached the stalled request"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    assert err.decode().strip().splitlines()[-1] == "hookproof: interrupted"
    assert "run stopped: interrupted" in out.decode()
    document = json.loads(report.read_text(encoding="utf-8"))
    assert document["interrupted"] == "interrupted"
    finished = document["scenarios"]
    assert finished, "the scenarios that finished before Ctrl-C are in the report"
    assert len(finished) < len(CATALOGUE.tagged(Harness.C)), "the rest did not run"
