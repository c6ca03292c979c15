"""The demo's sender half: ``hookproof check-sender`` against our own ``hookproof send``.

A compressed schedule (seconds, not hours) is written once as a TOML policy file; the trigger runs
``hookproof send --policy-file`` with it in real time, one SQLite sender database per scenario,
and check-sender judges it against the same file, every scenario at once.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from conformance.sender_check.runner import SenderCheckSettings
from receiver.signing import scheme_named

__all__ = ["DEMO_POLICY", "demo_sender_settings", "send_trigger"]

DEMO_POLICY = """\
# The demo's compressed schedule: what `hookproof send` runs and check-sender holds it to.
delays = [0, 1, 1.5]
max_attempts = 3
timeout = 1
honor_retry_after = true
"""


def send_trigger(policy_file: Path, workdir: Path) -> str:
    """The trigger that makes ``hookproof send`` deliver one event to the scenario's URL."""
    python = shlex.quote(sys.executable)
    db = shlex.quote(str(workdir)) + '/"$HOOKPROOF_SCENARIO".sqlite'
    return (
        f'{python} -m conformance.cli send "$HOOKPROOF_TARGET_URL" '
        f"--policy-file {shlex.quote(str(policy_file))} --real-time --db {db}"
    )


def demo_sender_settings(
    workdir: Path, *, select: tuple[str, ...] = (), seed: int = 0
) -> SenderCheckSettings:
    """Settings that check ``hookproof send`` (policy file and databases under ``workdir``)."""
    policy = workdir / "sender-policy.toml"
    policy.write_text(DEMO_POLICY, encoding="utf-8")
    return SenderCheckSettings(
        secrets=(scheme_named(SenderCheckSettings.scheme).mint_secret().value,),
        trigger=send_trigger(policy, workdir),
        policy=str(policy),
        slack=0.75,
        quiet_period=1.5,
        jobs=20,
        max_time=120.0,
        select=select,
        seed=seed,
    )
