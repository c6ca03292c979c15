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
from collections.abc import Mapping

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
    """One run of the trigger command."""

    def __init__(self, command: str, env: Mapping[str, str]) -> None:
        self.command = command
        self.env = {**os.environ, **env}
        self._process: asyncio.subprocess.Process | None = None
        self._output = bytearray()
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._process = await asyncio.create_subprocess_shell(
            self.command,
            env=self.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        self._reader = asyncio.create_task(self._collect())

    async def _collect(self) -> None:
        assert self._process is not None
        stream = self._process.stdout
        assert stream is not None
        while chunk := await stream.read(4096):
            self._output += chunk
            del self._output[:-_TAIL]

    async def wait(self) -> int:
        assert self._process is not None
        code = await self._process.wait()
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._reader, 1.0)
        return code

    def last_line(self) -> str:
        lines = [ln.strip() for ln in self._output.decode("utf-8", "replace").splitlines()]
        return next((ln for ln in reversed(lines) if ln), "")

    async def stop(self) -> None:
        """Kill what still runs of the trigger (its whole process group) and reap it."""
        process = self._process
        if process is None:
            return
        # Its own session: the group outlives a trigger that left a sender running behind it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(process.wait(), 2.0)
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
