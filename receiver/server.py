"""Running an ASGI app under uvicorn (uvloop + httptools): in the foreground, or in a thread.

* :func:`serve` — the foreground server of ``hookproof receiver``, on a socket the caller has
  already bound (so "address in use" is a start-up error, not a log line after the fact).
* :func:`running_server` — a context manager for demos and tests: it binds a free loopback port,
  serves the app from a background thread, waits until the app's lifespan has started, yields the
  base URL (``http://127.0.0.1:<port>``) and stops the server on exit::

      with running_server(create_app(settings)) as base_url:
          httpx.post(base_url + "/webhooks", ...)

Both use the same uvicorn configuration, which is also what the receiver benchmark measures,
bounded by :class:`ServerLimits` (the defaults below; :mod:`receiver.http_guard` adds the two
bounds uvicorn lacks):

================== ========= ===================================================================
limit              default   what happens past it
================== ========= ===================================================================
limit_concurrency  512       more open connections (or running requests) than this: each new
                             request is answered 503 at once instead of queueing
header_timeout     10 s      request line and headers not complete this long after the
                             connection opened (or after the previous response): closed
max_header_bytes   16 KiB    a request head larger than this: 431, closed
keep_alive         5 s       an idle kept-alive connection is closed after this
backlog            2048      pending TCP connections the kernel queues for accept
================== ========= ===================================================================

The body has its own deadline in the middleware (``body_timeout``, 30 s: 408) and its size cap
(``max_body``: 413).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from receiver.exceptions import ConfigurationError
from receiver.http_guard import guarded_protocol

__all__ = [
    "DEFAULT_LIMITS",
    "LOOPBACK",
    "ServerLimits",
    "base_url",
    "bind_socket",
    "running_server",
    "serve",
    "server_config",
]

LOOPBACK = "127.0.0.1"
_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ServerLimits:
    """The bounds every hookproof server runs with (see the module docstring for each)."""

    limit_concurrency: int = 512
    header_timeout: float = 10.0
    max_header_bytes: int = 16 * 1024
    keep_alive: int = 5
    backlog: int = 2048

    def __post_init__(self) -> None:
        if self.limit_concurrency < 1 or self.max_header_bytes < 1 or self.backlog < 1:
            raise ConfigurationError("server limits must be positive")
        if not (self.header_timeout > 0 and self.keep_alive > 0):
            raise ConfigurationError("server timeouts must be positive")


DEFAULT_LIMITS = ServerLimits()


def server_config(
    app: ASGIApp,
    *,
    log_level: str = "warning",
    limits: ServerLimits = DEFAULT_LIMITS,
    **options: Any,
) -> uvicorn.Config:
    """The uvicorn configuration every hookproof server uses (uvloop, httptools with the
    :class:`ServerLimits`, no WebSocket, lifespan on)."""
    return uvicorn.Config(
        app,
        loop="uvloop",
        http=guarded_protocol(
            header_timeout=limits.header_timeout, max_header_bytes=limits.max_header_bytes
        ),
        ws="none",
        lifespan="on",
        log_level=log_level,
        access_log=False,
        limit_concurrency=limits.limit_concurrency,
        timeout_keep_alive=limits.keep_alive,
        backlog=limits.backlog,
        **options,
    )


def base_url(host: str, port: int) -> str:
    """``http://host:port``, an IPv6 literal in brackets (``http://[::1]:8000``), as a URL must
    write it: what a listening line prints, and what a user copies into ``hookproof check``."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}"


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket on ``host:port`` (``port`` 0 picks a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise ConfigurationError(f"cannot listen on {host}:{port}: {error.strerror}") from None
    sock.set_inheritable(True)
    return sock


def serve(
    app: ASGIApp,
    sock: socket.socket,
    *,
    log_level: str = "info",
    limits: ServerLimits = DEFAULT_LIMITS,
) -> None:
    """Serve ``app`` on ``sock`` in the foreground until interrupted (SIGINT/SIGTERM)."""
    server = uvicorn.Server(server_config(app, log_level=log_level, limits=limits))
    server.run(sockets=[sock])
    if not server.started:
        raise ConfigurationError("the receiver failed to start (see the log above)")


@contextlib.contextmanager
def running_server(
    app: ASGIApp,
    *,
    host: str = LOOPBACK,
    port: int = 0,
    log_level: str = "warning",
    limits: ServerLimits = DEFAULT_LIMITS,
    root_path: str = "",
) -> Iterator[str]:
    """Serve ``app`` from a background thread; yields its base URL, stops on exit.

    ``root_path`` is uvicorn's (the app is told it is mounted below that prefix)."""
    sock = bind_socket(host, port)
    bound_port = sock.getsockname()[1]
    config = server_config(app, log_level=log_level, limits=limits, root_path=root_path)
    server = uvicorn.Server(config)

    def run() -> None:
        try:
            server.run(sockets=[sock])
        except SystemExit:  # uvicorn exits this way when the app's lifespan fails to start
            return

    thread = threading.Thread(target=run, name="hookproof-server", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise ConfigurationError("the receiver failed to start (see the log)")
            time.sleep(0.005)  # real-time: uvicorn starts on its own thread; poll its flag
        yield base_url(host, bound_port)
    finally:
        server.should_exit = True
        thread.join(_STOP_TIMEOUT_S)
        sock.close()
