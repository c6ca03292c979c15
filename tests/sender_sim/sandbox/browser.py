"""A real headless Chromium for the dashboard's browser tests and the docs' screenshots.

Debian's ``/usr/bin/chromium`` (installed by ``.ci/run`` with apt-get), driven by Playwright's
Python package; ``playwright install`` is never run. :func:`why_no_browser` says why the browser
cannot start here (``None``: it can), so tests skip with that reason and nothing else.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "why_no_browser"]

CHROMIUM = os.environ.get("HOOKPROOF_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def why_no_browser() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed (pip install -e '.[test]')"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install -y chromium; .ci/run does it)"
    return None
