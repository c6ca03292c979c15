"""Every sender command, option, sandbox command and fault is documented (sqlite-utils'
``test_docs.py`` idea): a new flag without docs fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest

from conformance.cli import cli
from sender_sim.sandbox.engine import FAULT_NAMES
from sender_sim.sandbox.templates import load_templates
from sender_sim.sandbox.terminal import COMMANDS

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _cli_section() -> str:
    """The "## Command line" section of docs/sender-sim.md (up to the next level-2 heading)."""
    text = (DOCS / "sender-sim.md").read_text(encoding="utf-8")
    assert "## Command line\n" in text
    section = text.split("## Command line\n", 1)[1]
    return re.split(r"^## ", section, maxsplit=1, flags=re.MULTILINE)[0]


def _command(*path: str) -> click.Command:
    command: click.Command = cli
    ctx = click.Context(cli)
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(ctx, name)
        assert found is not None, name
        command = found
    return command


def _options(command: click.Command) -> list[str]:
    names: list[str] = []
    for param in command.params:
        if isinstance(param, click.Option):
            names.extend(n for n in (*param.opts, *param.secondary_opts) if n.startswith("--"))
    return names


def _documented(option: str, text: str) -> bool:
    """``--opt`` appears as code, alone (`` `--opt` ``) or as a pair (`` `--a/--opt` ``)."""
    return f"`{option}" in text or f"/{option}`" in text


SENDER_COMMANDS = [
    ("send",),
    ("dlq", "list"),
    ("dlq", "redrive"),
    ("explain",),
    ("endpoints", "add"),
    ("endpoints", "list"),
    ("endpoints", "disable"),
    ("endpoints", "enable"),
    ("endpoints", "delete"),
    ("endpoints", "history"),
    ("deliveries", "list"),
    ("deliveries", "export"),
    ("resend",),
    ("metrics",),
    ("shadow",),
]


@pytest.mark.parametrize("path", SENDER_COMMANDS, ids=" ".join)
def test_every_sender_command_and_option_is_documented(path: tuple[str, ...]) -> None:
    text = _cli_section()
    assert f"hookproof {' '.join(path)}" in text
    missing = [o for o in _options(_command(*path)) if not _documented(o, text)]
    assert missing == []


def test_every_sandbox_option_is_documented() -> None:
    text = (DOCS / "sandbox.md").read_text(encoding="utf-8")
    missing = [o for o in _options(_command("sandbox")) if not _documented(o, text)]
    assert missing == []


def test_every_sandbox_command_and_fault_is_documented() -> None:
    text = (DOCS / "sandbox.md").read_text(encoding="utf-8")
    for name, usage, _ in COMMANDS:
        assert f"`{name}" in text, name
        assert usage.split()[0] in text
    for fault in FAULT_NAMES:
        assert f"| `{fault}` |" in text, fault


def test_the_documented_template_file_loads(tmp_path: Path) -> None:
    text = (DOCS / "sandbox.md").read_text(encoding="utf-8")
    match = re.search(r"```json\n(.*?)```", text, re.DOTALL)
    assert match is not None
    path = tmp_path / "templates.json"
    path.write_text(match.group(1))
    templates = load_templates(str(path))
    assert templates.default == "order.shipped"
    json.loads(match.group(1))


def _examples() -> list[str]:
    text = (DOCS / "sender-sim.md").read_text(encoding="utf-8")
    return [line[2:] for line in text.splitlines() if line.startswith("$ hookproof ")]


@pytest.mark.parametrize("line", _examples())
def test_every_documented_command_line_parses(line: str) -> None:
    """Each ``$ hookproof …`` example parses as it is written (arguments with spaces quoted)."""
    import shlex

    words = shlex.split(line)[1:]
    command: click.Command = cli
    ctx = click.Context(cli)
    while isinstance(command, click.Group) and words:
        found = command.get_command(ctx, words[0])
        assert found is not None, words[0]
        command, words = found, words[1:]
    command.make_context(command.name or "hookproof", list(words), resilient_parsing=False)
