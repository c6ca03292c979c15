"""``--trigger``: the shell command that makes the sender emit one event, run once per scenario.

It runs through ``/bin/sh`` in a session of its own with ``HOOKPROOF_TARGET_URL``,
``HOOKPROOF_SCENARIO`` and ``HOOKPROOF_SECRET`` set; its output (stdout and stderr together) is
kept, the tail of it quoted when it fails. It may return at once or keep running (a CLI sender
that delivers in the foreground); whatever still runs when the scenario ends is killed with its
process group. :func:`check_trigger` finds the command's program before any scenario runs, so a
typo is one usage error and not one error per scenario.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from typing import IO

from conformance.exceptions import UsageError

__all__ = ["Trigger", "check_trigger"]

_TAIL = 4096


def check_trigger(command: str) -> None:
    """A :class:`UsageError` unless ``command``'s program exists (a path, on PATH or a shell
    builtin)."""
    try:
        words = shlex.split(command)
    except ValueError as error:
        raise UsageError(f"--trigger is not a valid shell command: {error}") from None
    words = [w for w in words if not ("=" in w and w.split("=", 1)[0].isidentifier())]
    if not words:
        raise UsageError("--trigger names no command")
    found = subprocess.run(  # looks the program up, never runs it
        ["/bin/sh", "-c", 'command -v "$1" >/dev/null 2>&1', "sh", words[0]],
        check=False,
    )
    if found.returncode != 0:
        raise UsageError(f"the --trigger command {words[0]!r} was not found")


class Trigger:
    """One run of the trigger command; its output goes to a scratch file (never a pipe that a
    background child could hold open)."""

    def __init__(self, command: str, env: Mapping[str, str]) -> None:
        self.command = command
        self.env = {**os.environ, **env}
        self._process: asyncio.subprocess.Process | None = None
        self._output: IO[bytes] | None = None

    async def start(self) -> None:
        self._output = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self._process = await asyncio.create_subprocess_shell(
            self.command,
            env=self.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=self._output,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )

    async def wait(self) -> int:
        assert self._process is not None
        return await self._process.wait()

    def last_line(self) -> str:
        """The last non-blank line the trigger printed."""
        if self._output is None:
            return ""
        self._output.seek(max(0, self._output.seek(0, os.SEEK_END) - _TAIL))
        text = self._output.read().decode("utf-8", "replace")
        return next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "")

    async def stop(self) -> None:
        """Kill what still runs of the trigger (its whole process group) and reap it."""
        process = self._process
        if process is not None:
            # Its own session: the group outlives a trigger that left a sender running behind it.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(process.wait(), 2.0)
        if self._output is not None:
            self._output.close()
