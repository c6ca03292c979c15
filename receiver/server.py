"""Running an ASGI app under uvicorn (uvloop + httptools): in the foreground, or in a thread.

* :func:`serve` — the foreground server of ``hookproof receiver``, on a socket the caller has
  already bound (so "address in use" is a start-up error, not a log line after the fact).
* :func:`running_server` — a context manager for demos and tests: it binds a free loopback port,
  serves the app from a background thread, waits until the app's lifespan has started, yields the
  base URL (``http://127.0.0.1:<port>``) and stops the server on exit::

      with running_server(create_app(settings)) as base_url:
          httpx.post(base_url + "/webhooks", ...)

Both use the same uvicorn configuration, which is also what the receiver benchmark measures.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from receiver.exceptions import ConfigurationError

__all__ = ["LOOPBACK", "bind_socket", "running_server", "serve", "server_config"]

LOOPBACK = "127.0.0.1"
_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 10.0


def server_config(app: ASGIApp, *, log_level: str = "warning", **options: Any) -> uvicorn.Config:
    """The uvicorn configuration every hookproof server uses (uvloop, httptools, lifespan on)."""
    return uvicorn.Config(
        app,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        log_level=log_level,
        access_log=False,
        **options,
    )


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


def serve(app: ASGIApp, sock: socket.socket, *, log_level: str = "info") -> None:
    """Serve ``app`` on ``sock`` in the foreground until interrupted (SIGINT/SIGTERM)."""
    server = uvicorn.Server(server_config(app, log_level=log_level))
    server.run(sockets=[sock])
    if not server.started:
        raise ConfigurationError("the receiver failed to start (see the log above)")


@contextlib.contextmanager
def running_server(
    app: ASGIApp, *, host: str = LOOPBACK, port: int = 0, log_level: str = "warning"
) -> Iterator[str]:
    """Serve ``app`` from a background thread; yields its base URL, stops on exit."""
    sock = bind_socket(host, port)
    bound_port = sock.getsockname()[1]
    server = uvicorn.Server(server_config(app, log_level=log_level))

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
        yield f"http://{host}:{bound_port}"
    finally:
        server.should_exit = True
        thread.join(_STOP_TIMEOUT_S)
        sock.close()
