"""The sandbox is an application on top of the simulator: ``sender_sim.sandbox`` imports the rest
of ``sender_sim``, nothing else in ``sender_sim`` imports it (only the root CLI names it)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "sender_sim"
SANDBOX = PACKAGE / "sandbox"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_nothing_else_in_sender_sim_imports_the_sandbox() -> None:
    outside = [p for p in PACKAGE.rglob("*.py") if SANDBOX not in p.parents]
    assert outside  # the walk found the package
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            n
            for n in _imports(path)
            if n == "sender_sim.sandbox" or n.startswith("sender_sim.sandbox.")
        )
        for path in outside
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_sandbox_room_holds_its_five_parts() -> None:
    names = {p.stem for p in SANDBOX.glob("*.py")}
    assert {"engine", "terminal", "web", "templates", "cli"} <= names
