"""The GitHub Action (``action.yml``): a composite action whose inputs are all declared and used,
whose flags are ``hookproof check``'s own, and whose run script passes secrets only through the
environment. Its shell script is run for real with a fake ``hookproof`` on PATH."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conformance.commands.check import check_command

yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")

ROOT = Path(__file__).resolve().parents[2]


def _action() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((ROOT / "action.yml").read_text())
    return document


def test_the_action_is_composite_and_uses_every_input_it_declares() -> None:
    action = _action()
    assert action["runs"]["using"] == "composite"
    text = (ROOT / "action.yml").read_text()
    used = set(re.findall(r"inputs\.([a-z-]+)", text))
    assert used == set(action["inputs"])
    assert {"url", "secret"} <= {k for k, v in action["inputs"].items() if v.get("required")}
    uploads = [s for s in action["runs"]["steps"] if "upload-artifact" in s.get("uses", "")]
    assert uploads
    assert uploads[0]["if"].startswith("always()")


def test_the_flags_the_action_passes_are_flags_of_check() -> None:
    text = (ROOT / "action.yml").read_text()
    known = {opt for param in check_command.params for opt in getattr(param, "opts", [])}
    passed = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", text.split("run: |", 1)[1]))
    assert passed <= known, passed - known


def test_the_run_script_builds_the_command_and_keeps_secrets_off_it(tmp_path: Path) -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    step = next(s for s in _action()["runs"]["steps"] if s.get("id") == "check")
    fake = tmp_path / "bin" / "hookproof"
    fake.parent.mkdir()
    fake.write_text(
        '#!/bin/sh\nprintf "%s\\n" "$@" > "$ARGS_FILE"\n'
        'echo "$HOOKPROOF_SECRET" > "$SECRET_FILE"\n'
        'printf "%s" "$HOOKPROOF_HEADERS" > "$HEADERS_FILE"\nexit 1\n'
    )
    fake.chmod(0o755)
    output = tmp_path / "github-output"
    env = {
        **os.environ,
        "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}",
        "ARGS_FILE": str(tmp_path / "args"),
        "SECRET_FILE": str(tmp_path / "secret"),
        "HEADERS_FILE": str(tmp_path / "headers"),
        "GITHUB_OUTPUT": str(output),
        "HOOKPROOF_SECRET": "whsec_dGVzdA==",
        "HOOKPROOF_PROBE_TOKEN": "",
        "INPUT_URL": "https://partner.example/webhooks",
        "INPUT_SCHEME": "stripe",
        "INPUT_PROBE": "",
        "INPUT_ANSWERS": "stripe",
        "INPUT_SELECT": "signature idempotency.*",
        "INPUT_DESELECT": "",
        "INPUT_CONFIG": "",
        "INPUT_WAIT": "30",
        "INPUT_MAX_TIME": "600",
        "INPUT_SEED": "",
        "INPUT_SETTLE": "2s",
        "HOOKPROOF_HEADERS": "X-Api-Key: k-123\n\nX-Tenant: acme corp\n",
        "INPUT_ARGS": "--timeout 3 --verbose",
        "REPORT_DIR": str(tmp_path / "reports"),
    }
    done = subprocess.run(["bash", "-c", step["run"]], env=env, cwd=tmp_path, timeout=30)
    assert done.returncode == 1  # hookproof's status is the step's
    args = (tmp_path / "args").read_text().splitlines()
    assert args[:2] == ["check", "https://partner.example/webhooks"]
    assert "whsec_dGVzdA==" not in args
    assert (tmp_path / "secret").read_text().strip() == "whsec_dGVzdA=="
    joined = " ".join(args)
    for expected in (
        "--scheme stripe",
        "--answers stripe",
        "--select signature --select idempotency.*",
        "--max-time 600",
        "--wait-for-endpoint 30",
        "--settle 2s",
        "--timeout 3 --verbose",
        f"--json {tmp_path / 'reports' / 'report.json'}",
    ):
        assert expected in joined
    assert "--probe" not in args
    assert "--header" not in args  # credentials: through the environment, like the secret
    assert (tmp_path / "headers").read_text() == "X-Api-Key: k-123\n\nX-Tenant: acme corp\n"
    assert "exit-code=1" in output.read_text()
