"""The project's shape: the dependency direction, honest ``__all__`` lists, typed packages."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("receiver", "sender_sim", "conformance")
FORBIDDEN = {
    "receiver": {"sender_sim", "conformance"},
    "sender_sim": {"conformance"},
    "conformance": set(),
}


def _imported_top_levels(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # lazily imported modules named as strings, e.g. importlib.import_module("x.y")
            head = node.value.split(".")[0].split(":")[0]
            if head in PACKAGES and "." in node.value and " " not in node.value:
                names.add(head)
    return names


@pytest.mark.parametrize("package", PACKAGES)
def test_dependencies_point_one_way(package: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imported_top_levels(path) & FORBIDDEN[package])
        for path in (ROOT / package).rglob("*.py")
    }
    assert {name: bad for name, bad in offenders.items() if bad} == {}


@pytest.mark.parametrize("package", PACKAGES)
def test_public_names_exist(package: str) -> None:
    module = importlib.import_module(package)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{package} declares no __all__"
    missing = [name for name in exported if not hasattr(module, name)]
    assert missing == []
    assert len(set(exported)) == len(exported)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_says_what_it_owns(package: str) -> None:
    undocumented = [
        str(path.relative_to(ROOT))
        for path in (ROOT / package).rglob("*.py")
        if ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) is None
    ]
    assert undocumented == []


@pytest.mark.parametrize("package", PACKAGES)
def test_packages_ship_type_information(package: str) -> None:
    assert (ROOT / package / "py.typed").exists()
