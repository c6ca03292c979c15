"""The project's shape: the dependency direction, no import cycle inside a package, honest
``__all__`` lists, typed packages."""

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


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _internal_imports(path: Path, package: str, known: set[str]) -> set[str]:
    """The modules of ``package`` that ``path`` imports anywhere: a lazy import inside a function
    or a ``TYPE_CHECKING`` one that dodges a cycle at import time is still a cycle of meaning."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = _module_name(path)
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def add(name: str) -> None:
        # `from a.b import c` may name module a.b.c or attribute c of a.b: keep the longest known.
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != here:
            found.add(name)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == package:
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module.split(".")[0] != package:
                continue
            for alias in node.names:
                add(f"{module}.{alias.name}")
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle in ``graph`` (as a closed path), or [] when there is none."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycles_inside_a_package(package: str) -> None:
    paths = list((ROOT / package).rglob("*.py"))
    known = {_module_name(path) for path in paths}
    graph = {
        _module_name(path): _internal_imports(path, package, known) - {package} for path in paths
    }
    assert _cycle(graph) == []


def test_the_cycle_finder_sees_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []
