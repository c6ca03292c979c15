"""The options several commands share are declared once (``receiver/commands/options.py``): every
command that has one offers the same choices and says what it does, never where it came from."""

from __future__ import annotations

import click
import pytest

from conformance.cli import COMMANDS, cli
from receiver.signing import SCHEMES


def _commands() -> dict[str, click.Command]:
    ctx = click.Context(cli)
    found: dict[str, click.Command] = {}
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            for sub in command.list_commands(ctx):
                leaf = command.get_command(ctx, sub)
                assert leaf is not None
                found[f"{name} {sub}"] = leaf
        else:
            found[name] = command
    return found


def _option(command: click.Command, name: str) -> click.Option | None:
    for param in command.params:
        if isinstance(param, click.Option) and name in param.opts:
            return param
    return None


COMMANDS_BY_NAME = _commands()


WITH_SCHEME = sorted(n for n, c in COMMANDS_BY_NAME.items() if _option(c, "--scheme"))


def test_the_signing_commands_have_a_scheme() -> None:
    assert WITH_SCHEME == ["check", "check-sender", "endpoints add", "receiver", "sandbox", "send"]


@pytest.mark.parametrize("name", WITH_SCHEME)
def test_scheme_choices_come_from_the_registry(name: str) -> None:
    option = _option(COMMANDS_BY_NAME[name], "--scheme")
    assert option is not None
    assert isinstance(option.type, click.Choice)
    assert list(option.type.choices) == sorted(SCHEMES)


@pytest.mark.parametrize("name", sorted(COMMANDS_BY_NAME))
def test_shared_options_say_what_they_do_not_where_they_came_from(name: str) -> None:
    for param in COMMANDS_BY_NAME[name].params:
        if isinstance(param, click.Option):
            assert param.help, f"{name} {param.opts}"
            assert "seed 0" not in param.help, f"{name} {param.opts}: {param.help}"


def test_every_command_with_a_secret_reads_it_the_same_way() -> None:
    secrets = [o for c in COMMANDS_BY_NAME.values() if (o := _option(c, "--secret")) is not None]
    assert len(secrets) >= 4  # receiver, send, dlq redrive, sandbox, check
    assert {(o.name, o.multiple, o.envvar, o.help) for o in secrets} == {
        (secrets[0].name, True, "HOOKPROOF_SECRET", secrets[0].help)
    }


def test_every_command_showing_reproductions_has_the_same_verbose_flag() -> None:
    """check, replay and check-sender print failures' reproductions: ``--verbose``/``-v`` shows
    all of them, declared once (``verbose_option``)."""
    verbose = {n: o for n, c in COMMANDS_BY_NAME.items() if (o := _option(c, "--verbose"))}
    assert sorted(verbose) == ["check", "check-sender", "replay"]
    assert {(tuple(o.opts), o.is_flag, o.default) for o in verbose.values()} == {
        (("--verbose", "-v"), True, None)
    }


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("--max-time", ["check", "check-sender", "replay"]),
        ("--select", ["check", "check-sender", "demo", "scenarios"]),
        ("--deselect", ["check", "check-sender"]),
        ("--junit", ["check", "check-sender", "demo"]),
        ("--ndjson", ["check", "check-sender"]),
    ],
)
def test_the_run_options_are_one_declaration_each(flag: str, expected: list[str]) -> None:
    """--max-time (receiver/commands/options.py) and the selection and report-file options
    (conformance/commands/options.py) read the same way in every command that has them."""
    found = {n: o for n, c in COMMANDS_BY_NAME.items() if (o := _option(c, flag))}
    assert sorted(found) == expected
    declared = {(o.name, o.multiple, repr(o.type), o.metavar, o.help) for o in found.values()}
    assert len(declared) == 1, declared
