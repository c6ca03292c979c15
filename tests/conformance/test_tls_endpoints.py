"""An ``https://`` endpoint whose TLS cannot be used is one line that says why and what to do
(exit 2), at once rather than waited out; with its CA given in ``SSL_CERT_FILE`` the run goes on."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conformance import session
from conformance.cli import main
from tests.conformance.support import SECRET
from tests.tls_support import self_signed


class _Ok(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("tls"), host="127.0.0.1")


def _serve(tls: tuple[Path, Path] | None) -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tls[1], tls[0])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def self_signed_server(certificate: tuple[Path, Path]) -> Iterator[int]:
    yield from _serve(certificate)


@pytest.fixture
def plain_server() -> Iterator[int]:
    yield from _serve(None)


@pytest.fixture(autouse=True)
def _fresh_tls_context(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    session._verified_tls.cache_clear()  # the CA bundle is loaded once per process
    yield
    session._verified_tls.cache_clear()


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


def test_a_certificate_that_cannot_be_verified_is_said_at_once_with_the_fix(
    self_signed_server: int, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"https://127.0.0.1:{self_signed_server}/webhooks"
    started = time.monotonic()
    code = main(["check", url, "--secret", SECRET, "--wait-for-endpoint", "20"])
    elapsed = time.monotonic() - started
    line = _one_line(capsys)
    assert code == 2
    assert "certificate could not be verified (self-signed certificate)" in line
    assert "SSL_CERT_FILE" in line
    assert "never answered" not in line
    assert elapsed < 10  # not retried for the 20 s a starting endpoint is given


def test_an_https_url_on_a_plain_http_port_says_so(
    plain_server: int, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["check", f"https://127.0.0.1:{plain_server}/webhooks", "--secret", SECRET])
    line = _one_line(capsys)
    assert code == 2
    assert "TLS handshake failed" in line
    assert "plain http://" in line


def test_a_probe_behind_an_unverifiable_certificate_is_one_line_too(
    plain_server: int, self_signed_server: int, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            *["check", f"http://127.0.0.1:{plain_server}/webhooks", "--secret", SECRET],
            *["--probe", f"https://127.0.0.1:{self_signed_server}/_hookproof/events"],
            *["--probe-token", "t"],
        ]
    )
    line = _one_line(capsys)
    assert code == 2
    assert "probe" in line
    assert "certificate could not be verified" in line


def test_with_its_ca_in_ssl_cert_file_the_run_goes_on(
    self_signed_server: int,
    certificate: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[1]))
    url = f"https://127.0.0.1:{self_signed_server}/webhooks"
    code = main(["check", url, "--secret", SECRET, "--select", "signature.missing-*"])
    captured = capsys.readouterr()
    assert "certificate" not in captured.err
    # the stand-in answers 200 to everything, so the run judges (and fails) the scenarios
    assert code == 1
    assert "FAILED" in captured.out
