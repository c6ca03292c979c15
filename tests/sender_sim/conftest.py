"""Factories for the sender simulator tests: a virtual clock at the seed's morning, a shared
secret, and a simulator wired to a scripted in-process receiver (``httpx.MockTransport``); for
the CLI tests, a private working folder and the reference receiver on a loopback port."""

from __future__ import annotations

import base64
import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from sender_sim import FaultPlan, Policy, Simulator, SQLiteStore, VirtualClock

if TYPE_CHECKING:
    from tests.sender_sim.test_cli_support import ScriptedReceiver

T0 = datetime(2026, 8, 13, 9, 0, tzinfo=UTC)
SECRET = "whsec_" + base64.b64encode(bytes(range(32))).decode()
URL = "http://127.0.0.1:8999/webhooks"
US = timedelta(microseconds=1)

Handler = Callable[[httpx.Request], httpx.Response]


class FixedRandom(random.Random):
    """A ``random.Random`` whose ``randint`` returns scripted values (jitter fixed by the test)."""

    def __init__(self, *values: int) -> None:
        super().__init__(0)
        self.values = list(values)
        self.asked: list[tuple[int, int]] = []

    def randint(self, a: int, b: int) -> int:
        self.asked.append((a, b))
        value = self.values.pop(0)
        assert a <= value <= b, f"scripted draw {value} outside [{a}, {b}]"
        return value


def always(status: int, **headers: str) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers=headers, text=f"status {status}")

    return handler


MakeSim = Callable[..., Simulator]


@pytest.fixture
def make_sim() -> Iterator[MakeSim]:
    """``make_sim(handler=..., policy=..., seed=..., faults=..., rng=..., store=...)``."""
    made: list[Simulator] = []

    def make(
        handler: Handler | None = None,
        *,
        policy: Policy | None = None,
        seed: int = 0,
        faults: FaultPlan | None = None,
        rng: random.Random | None = None,
        store: SQLiteStore | None = None,
        client: httpx.AsyncClient | None = None,
        start: datetime = T0,
        **kwargs: Any,
    ) -> Simulator:
        if client is None:
            client = httpx.AsyncClient(transport=httpx.MockTransport(handler or always(200)))
        sim = Simulator(
            store or SQLiteStore(":memory:"),
            clock=VirtualClock(start),
            policy=policy,
            client=client,
            seed=seed,
            faults=faults,
            rng=rng,
            **kwargs,
        )
        sim.add_endpoint("partner", URL, [SECRET])
        made.append(sim)
        return sim

    yield make
    for sim in made:
        sim.store.close()


class Receiver:
    """A scripted in-process receiver that verifies every request with ``receiver.signing``
    (401 when verification fails) and answers ``statuses`` in turn (then the last one)."""

    def __init__(
        self, *statuses: int, secrets: tuple[str, ...] = (SECRET,), scheme: str = "standard"
    ) -> None:
        from receiver.signing import Secret, Verifier, scheme_named

        self.verifier = Verifier([Secret(s) for s in secrets], scheme=scheme_named(scheme))
        self.statuses = list(statuses) or [200]
        self.requests: list[httpx.Request] = []
        self.verified: list[bool] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        from receiver.exceptions import VerificationError

        self.requests.append(request)
        try:
            self.verifier.verify(request.content, dict(request.headers))
        except VerificationError as error:
            self.verified.append(False)
            return httpx.Response(error.status, json={"type": error.problem_type})
        self.verified.append(True)
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return httpx.Response(status, json={"ok": status < 300})


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def _shared_receiver() -> Iterator[ScriptedReceiver]:
    """A scripted receiver on a real loopback port, one per test module."""
    from tests.sender_sim.test_cli_support import scripted

    with scripted(200) as running:
        yield running


@pytest.fixture
def receiver(_shared_receiver: ScriptedReceiver) -> ScriptedReceiver:
    """The module's loopback receiver, its script (200) and log reset for each test."""
    _shared_receiver.statuses = [200]
    _shared_receiver.received.clear()
    return _shared_receiver


@pytest.fixture
def in_private_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test runs in its own folder (so the default --db is private to it), without a
    ``HOOKPROOF_SECRET`` from the environment. CLI test modules use it for every test."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HOOKPROOF_SECRET", raising=False)


@pytest.fixture
def reference(tmp_path: Path) -> Iterator[str]:
    """The reference receiver (SQLite inbox, probe on) on a loopback port: its webhook URL."""
    from receiver.app import ReceiverSettings, create_app
    from receiver.server import running_server

    settings = ReceiverSettings(
        secrets=[SECRET], db=str(tmp_path / "inbox.sqlite"), probe_token="probe-token"
    )
    with running_server(create_app(settings)) as base:
        yield base + "/webhooks"
