"""The ``hookproof`` console script: one click group whose subcommands live in their own packages.

Subcommands are declared as data (name → ``module:attribute``) and imported only when used, so
``hookproof --help`` stays fast and each package owns its commands. :func:`main` turns every usage
error and every error of hookproof's own hierarchies into one readable line and exit status 2.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import click

from receiver.exceptions import ReceiverError

INTERRUPTED_EXIT = 130
"""The exit status of a command stopped by Ctrl-C (128 + SIGINT, as shells report it)."""

__all__ = ["COMMANDS", "cli", "main", "run"]

COMMANDS: dict[str, tuple[str, str]] = {
    "receiver": ("receiver.commands.receiver", "receiver_command"),
    "send": ("sender_sim.commands.send", "send_command"),
    "dlq": ("sender_sim.commands.dlq", "dlq_group"),
    "explain": ("sender_sim.commands.explain", "explain_command"),
    "endpoints": ("sender_sim.commands.endpoints", "endpoints_group"),
    "deliveries": ("sender_sim.commands.deliveries", "deliveries_group"),
    "resend": ("sender_sim.commands.resend", "resend_command"),
    "metrics": ("sender_sim.commands.metrics", "metrics_command"),
    "shadow": ("sender_sim.commands.shadow", "shadow_command"),
    "sandbox": ("sender_sim.sandbox.cli", "sandbox_command"),
    "check": ("conformance.commands.check", "check_command"),
    "check-sender": ("conformance.commands.check_sender", "check_sender_command"),
    "replay": ("conformance.commands.replay", "replay_command"),
    "scenarios": ("conformance.commands.scenarios", "scenarios_command"),
    "demo": ("conformance.commands.demo", "demo_command"),
}
"""Every subcommand: its name and where its click command lives."""


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attribute = target
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hookproof", prog_name="hookproof")
def cli() -> None:
    """Prove that a webhook receiver survives the ugly cases."""


def _own_errors() -> tuple[type[Exception], ...]:
    """The root errors of every hookproof package that is installed and importable."""
    errors: list[type[Exception]] = [ReceiverError]
    for module, name in (
        ("sender_sim.exceptions", "SimulatorError"),
        ("conformance.exceptions", "ConformanceError"),
    ):
        try:
            errors.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(errors)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; usage and configuration errors are one line on stderr and exit status 2."""
    try:
        result = cli.main(args=list(argv) if argv is not None else None, standalone_mode=False)
    except click.exceptions.Abort:  # Ctrl-C (click makes an Abort of a KeyboardInterrupt)
        click.echo("hookproof: interrupted", err=True)
        return INTERRUPTED_EXIT
    except click.exceptions.Exit as done:
        return int(done.exit_code)
    except click.exceptions.NoArgsIsHelpError as bare:
        # A group called without a subcommand: show its help, as `--help` would.
        click.echo(bare.ctx.get_help() if bare.ctx is not None else bare.format_message())
        return 0
    except click.ClickException as error:
        click.echo(f"hookproof: error: {error.format_message()}", err=True)
        return 2
    except _own_errors() as error:
        click.echo(f"hookproof: error: {error}", err=True)
        return 2
    return result if isinstance(result, int) else 0


def run() -> None:
    """The console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    run()
