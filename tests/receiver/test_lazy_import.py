"""``import receiver.signing`` (what the sender and the runner need) loads no web server, no
Starlette application module and no sqlite-utils: the package's ``__init__`` is lazy (PEP 562)."""

from __future__ import annotations

import json
import subprocess
import sys

import receiver

HEAVY = ("uvicorn", "starlette.applications", "sqlite_utils")


def _loaded_after(statement: str) -> list[str]:
    probe = (
        f"import json, sys\n{statement}\n"
        f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    )
    # -I: a clean interpreter (no user site, no PYTHON* variables); the project is installed.
    done = subprocess.run(
        [sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def test_importing_the_signing_module_loads_no_web_server_or_sqlite_utils() -> None:
    assert _loaded_after("import receiver.signing") == []


def test_the_package_still_exports_every_name() -> None:
    for name in receiver.__all__:
        assert getattr(receiver, name) is not None
    assert _loaded_after("from receiver import create_app") != []  # the lazy path does load
