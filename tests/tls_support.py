"""A self-signed certificate for the tests' TLS servers, made by the ``openssl`` command line
(the tests that need one skip, saying so, where it is not installed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["self_signed"]


def self_signed(where: Path, *, host: str = "localhost") -> tuple[Path, Path]:
    """``(key, certificate)`` PEM files in ``where`` for ``host`` (a DNS name or an IP)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (it makes the test's self-signed certificate)")
    key, cert = where / "key.pem", where / "cert.pem"
    kind = "IP" if host.replace(".", "").isdigit() else "DNS"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", f"/CN={host}", "-addext", f"subjectAltName={kind}:{host}",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return key, cert
