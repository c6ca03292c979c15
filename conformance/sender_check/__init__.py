"""``hookproof check-sender``: a real webhook sender judged from outside against its declared
retry policy.

For each ``sender.*`` scenario (tag X) a unique URL is opened on hookproof's own listener, the
trigger makes the sender emit one event there, the listener answers every attempt from the
scenario's script and records it, and the history is judged when the sender stops. The room::

    declared.py   the declared policy (built-in profile or TOML file), slack and bounds
    script.py     the scripted answers a scenario's steps declare
    listener.py   the loopback HTTP listener: one session per scenario URL, every attempt recorded
    judging.py    the checks: pure functions over the recorded attempts
    trigger.py    running --trigger once per scenario (and checking it exists first)
    runner.py     one scenario to one verdict, and the scenarios run concurrently as engine events
"""

from __future__ import annotations

from conformance.sender_check.declared import Declared, resolve_policy
from conformance.sender_check.runner import SenderCheckSettings, run_sender_check

__all__ = ["Declared", "SenderCheckSettings", "resolve_policy", "run_sender_check"]
