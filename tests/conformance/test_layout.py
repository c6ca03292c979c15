"""The conformance package's layout: the harnesses live in a folder of their own (import cycles
are forbidden for every package by ``tests/test_architecture.py``)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "conformance"


def test_the_harnesses_have_a_folder_of_their_own() -> None:
    names = {p.stem for p in (PACKAGE / "harnesses").glob("*.py")}
    assert {"http", "simulated", "state", "scripted_receiver"} <= names
    gone = {"wire", "wire_harness", "sender_harness", "sender_driver", "scripted", "exchange"}
    assert not gone & {p.stem for p in PACKAGE.glob("*.py")}
