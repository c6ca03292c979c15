"""Real server processes for tests: start any argv with any env, wait until it answers, kill -9.

::

    port = free_port()
    argv = hookproof_argv("receiver", "--port", str(port), "--secret", secret)
    with ServerProcess.start(argv, ready_url=f"http://127.0.0.1:{port}/healthz") as proc:
        ...              # proc.base_url, proc.output()
        proc.kill()      # SIGKILL, then reaped; proc.returncode is -9

Nothing here is specific to the receiver: the PostgreSQL helpers reuse it. Output (stdout and
stderr together) goes to a temporary file so a chatty server never blocks on a full pipe, and it
is shown when the process fails to become ready.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

import httpx

__all__ = ["LOOPBACK", "ServerProcess", "free_port", "hookproof_argv", "wait_until_answers"]

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def hookproof_argv(*arguments: str) -> list[str]:
    """``hookproof <arguments>`` run with this interpreter (no reliance on PATH)."""
    return [sys.executable, "-c", "from conformance.cli import run; run()", *arguments]


def wait_until_answers(
    url: str, *, timeout: float = 20.0, alive: subprocess.Popen[bytes] | None = None
) -> httpx.Response:
    """Poll ``url`` with GET until any HTTP answer arrives; raise if ``alive`` exits first."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if alive is not None and alive.poll() is not None:
            raise RuntimeError(f"the process exited with {alive.returncode} before answering")
        try:
            return httpx.get(url, timeout=1.0)
        except httpx.TransportError as error:
            last_error = error
        time.sleep(0.02)  # real-time: the server process starts on its own schedule
    raise TimeoutError(f"{url} did not answer within {timeout} s ({last_error!r})")


class ServerProcess:
    """One child process (its own process group) and its captured output."""

    def __init__(self, popen: subprocess.Popen[bytes], log: IO[bytes], base_url: str | None):
        self.popen = popen
        self._log = log
        self.base_url = base_url

    @classmethod
    def start(
        cls,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        ready_url: str | None = None,
        base_url: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        timeout: float = 20.0,
    ) -> ServerProcess:
        """Start ``argv`` (``env`` is added to this process's environment) and wait until
        ``ready_url`` answers; ``base_url`` defaults to ``ready_url``'s scheme://host:port."""
        log = tempfile.TemporaryFile()  # noqa: SIM115 - owned by the ServerProcess
        popen = subprocess.Popen(
            list(argv),
            env={**os.environ, **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
        )
        if base_url is None and ready_url is not None:
            parsed = httpx.URL(ready_url)
            base_url = f"{parsed.scheme}://{parsed.host}:{parsed.port}"
        process = cls(popen, log, base_url)
        if ready_url is not None:
            try:
                wait_until_answers(ready_url, timeout=timeout, alive=popen)
            except Exception as error:
                process.kill()
                output = process.output()
                process.close()
                raise RuntimeError(f"{error}; output:\n{output}") from error
        return process

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def output(self) -> str:
        """Everything the process wrote so far (stdout and stderr)."""
        self._log.flush()
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def kill(self) -> None:
        """SIGKILL the process (no clean-up of any kind) and reap it."""
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=10)

    def kill_group(self) -> None:
        """SIGKILL the whole process group: the process and every child it forked (the workers of
        ``php -S`` under PHP_CLI_SERVER_WORKERS outlive a killed parent), then reap the process."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)  # start_new_session: its group id is its pid
        self.popen.wait(timeout=10)

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, wait, and SIGKILL if it lingers; returns the exit status."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return int(self.popen.wait())

    def close(self) -> None:
        """Kill the process if it still runs and drop its captured output."""
        if self.popen.poll() is None:
            self.kill()
        self._log.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        self.close()


def repository_root() -> Path:
    """The repository root (where pyproject.toml is)."""
    return Path(__file__).resolve().parents[2]
