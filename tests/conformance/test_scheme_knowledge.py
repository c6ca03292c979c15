"""Scheme knowledge lives in the scheme objects (``receiver/schemes``): the conformance package
never compares against a scheme's name nor lists schemes by hand (issue 8)."""

from __future__ import annotations

import ast
from pathlib import Path

from receiver.signing import SCHEMES

ROOT = Path(__file__).resolve().parents[2] / "conformance"


def _names_in(node: ast.AST) -> set[str]:
    return {
        child.value
        for child in ast.walk(node)
        if isinstance(child, ast.Constant) and child.value in SCHEMES
    }


def test_conformance_never_branches_on_a_scheme_name() -> None:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare | ast.Set) and _names_in(node):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_the_catalogue_scheme_sets_come_from_the_scheme_objects() -> None:
    from conformance.model import SCHEMES as NAMES
    from conformance.model import SEVERAL_SIGNATURES, TIMED

    assert frozenset(SCHEMES) == NAMES
    assert {n for n in NAMES if SCHEMES[n].uses_timestamp} == TIMED
    assert {n for n in NAMES if SCHEMES[n].several_signatures} == SEVERAL_SIGNATURES
