"""``hookproof demo``: the reference receiver, with its probe and a SQLite inbox in a scratch
directory, served by uvicorn on a free loopback port for the length of one check run."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from conformance.config import CheckSettings
from receiver.app import ReceiverSettings, create_app
from receiver.server import running_server
from receiver.signing import SCHEMES

__all__ = ["ServedReceiver", "demo_settings", "serving_reference_receiver"]


@dataclass(frozen=True)
class ServedReceiver:
    """Where the demo receiver listens and how to talk to it."""

    url: str
    probe_prefix: str
    secret: str = field(repr=False)
    probe_token: str = field(repr=False)
    max_body: int | None = None
    """The body limit the receiver enforces (so ``size.over-limit`` is judged)."""


@contextmanager
def serving_reference_receiver(workdir: Path) -> Iterator[ServedReceiver]:
    """Serve the reference receiver (fresh secret, probe token and inbox) until the block ends."""
    secret = SCHEMES["standard"].mint_secret().value
    token = secrets.token_urlsafe(18)
    settings = ReceiverSettings(
        secrets=[secret], db=str(workdir / "inbox.sqlite"), probe_token=token
    )
    with running_server(create_app(settings)) as base:
        yield ServedReceiver(
            url=base + settings.path,
            probe_prefix=base + settings.probe_prefix,
            secret=secret,
            probe_token=token,
            max_body=settings.max_body,
        )


def demo_settings(served: ServedReceiver) -> CheckSettings:
    """Check settings for the served receiver: its secret, its probe, defaults otherwise."""
    return CheckSettings(
        url=served.url,
        secrets=(served.secret,),
        probe=served.probe_prefix,
        probe_token=served.probe_token,
        max_body=served.max_body,
    )
