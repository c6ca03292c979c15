"""The sandbox's interactive commands: one line in, engine calls and text out.

:class:`SandboxShell` parses a line (shell-style quoting) and calls the
:class:`~sender_sim.sandbox.engine.SandboxEngine`; it writes through a callable, so the same shell
serves the terminal and the tests (which feed it lines). The commands are data (:data:`COMMANDS`:
name, usage, what it does) — ``help`` prints them and the docs test checks each is documented::

    publish [TYPE] [key=value…]        faults        fault on|off NAME[:k=v,…]
    list    dlq [REASON] [business_key=KEY]    explain ID    templates    help    quit
    redrive ID[,ID…] --actor A --reason R --deadline D    resend ID[,ID…] --actor A

A bad line is one ``error: …`` line and the shell goes on; ``quit`` (or the end of input) ends it.
"""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from receiver.commands.console import table_lines
from sender_sim.commands.support import parse_fields
from sender_sim.exceptions import ConfigurationError, RedriveRefused, SimulatorError
from sender_sim.records import DeadLetterReason, Delivery, rfc3339
from sender_sim.sandbox.engine import FAULT_EFFECT, SandboxEngine
from sender_sim.sandbox.queries import ResendRefused

__all__ = ["COMMANDS", "RESERVED_FIELDS", "SandboxShell", "interact"]

COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("publish", "publish [TYPE] [key=value…]", "publish an event from its template"),
    ("templates", "templates", "list the event templates"),
    ("list", "list", "the latest deliveries with their state"),
    ("dlq", "dlq [REASON] [business_key=KEY]", "dead letters by reason and business key"),
    ("explain", "explain ID", "a delivery's whole story (an id prefix is enough)"),
    (
        "redrive",
        "redrive ID[,ID…] --actor A --reason R --deadline D",
        "audited redrive of dead letters",
    ),
    (
        "resend",
        "resend ID[,ID…] --actor A",
        "a new delivery of each delivered or dead-letter one's event (1-100, all or none)",
    ),
    ("faults", "faults", "every fault and whether it is on"),
    ("fault", "fault on|off NAME[:k=v,…]", "toggle a fault, e.g. fault on crash_after_send"),
    ("help", "help", "this list"),
    ("quit", "quit", "leave the sandbox (end of input does too)"),
)
"""Every command: name, usage, what it does."""
COMMAND_USAGE = {name: usage for name, usage, _ in COMMANDS}

RESERVED_FIELDS = ("business_key", "deadline", "event_id")
"""``publish`` keys that set the event, not its data (``data.NAME=…`` sets such a data field)."""

Write = Callable[[str], None]


class SandboxShell:
    """Runs sandbox command lines against an engine (see the module docstring)."""

    def __init__(self, engine: SandboxEngine, write: Write) -> None:
        self.engine = engine
        self.write = write
        self._handlers: dict[str, Callable[[list[str]], Awaitable[bool]]] = {
            "publish": self._publish,
            "templates": self._templates,
            "list": self._list,
            "dlq": self._dlq,
            "explain": self._explain,
            "redrive": self._redrive,
            "resend": self._resend,
            "faults": self._faults,
            "fault": self._fault,
            "help": self._help,
            "quit": self._quit,
            "exit": self._quit,
        }

    async def execute(self, line: str) -> bool:
        """Run one command line; ``False`` when the shell should end."""
        try:
            words = shlex.split(line)
        except ValueError as error:
            self.write(f"error: {error}")
            return True
        if not words:
            return True
        handler = self._handlers.get(words[0].lower())
        if handler is None:
            self.write(f"error: unknown command {words[0]!r}; type help")
            return True
        try:
            return await handler(words[1:])
        except (RedriveRefused, ResendRefused):
            return True  # the engine has reported the refusal
        except SimulatorError as error:
            self.write(f"error: {error}")
            return True

    # -- commands ------------------------------------------------------------------------------

    async def _publish(self, args: list[str]) -> bool:
        event_type = args[0] if args and "=" not in args[0] else None
        fields = parse_fields(args[1:] if event_type else args)
        options: dict[str, Any] = {k: fields.pop(k) for k in RESERVED_FIELDS if k in fields}
        data = {k.removeprefix("data."): v for k, v in fields.items()}
        self.engine.publish(
            event_type,
            data,
            business_key=None if "business_key" not in options else str(options["business_key"]),
            deadline=None if "deadline" not in options else str(options["deadline"]),
            event_id=None if "event_id" not in options else str(options["event_id"]),
        )
        await self.engine.kick()
        return True

    async def _templates(self, args: list[str]) -> bool:
        templates = self.engine.templates
        for name in templates.names():
            template = templates.get(name)
            mark = " (default)" if name == templates.default else ""
            key = f" business key: {template.business_key};" if template.business_key else ""
            fields = ", ".join(template.data) or "(no data fields)"
            self.write(f"  {name}{mark}:{key} data: {fields}")
        return True

    def _rows(self, items: Sequence[Delivery]) -> list[tuple[str, ...]]:
        return [
            (
                d.delivery_id,
                self.engine.sim.event(d.event_id).type,
                d.business_key or "-",
                d.state.value + (f" ({d.reason.value})" if d.reason else ""),
                f"{d.attempt}/{d.max_attempts}",
                rfc3339(d.deadline_at),
            )
            for d in items
        ]

    async def _list(self, args: list[str]) -> bool:
        items = self.engine.deliveries(limit=20)
        if not items:
            self.write("no deliveries yet; try: publish")
            return True
        headers = ("DELIVERY", "TYPE", "BUSINESS KEY", "STATE", "ATTEMPTS", "DEADLINE")
        for line in table_lines(headers, self._rows(items)):
            self.write(line)
        return True

    async def _dlq(self, args: list[str]) -> bool:
        fields = parse_fields([a for a in args if "=" in a])
        unknown = set(fields) - {"business_key"}
        if unknown:
            raise ConfigurationError(f"dlq filters by REASON and business_key=KEY, not {unknown}")
        reasons = [a for a in args if "=" not in a]
        if len(reasons) > 1 or (reasons and reasons[0] not in set(DeadLetterReason)):
            choices = ", ".join(r.value for r in DeadLetterReason)
            raise ConfigurationError(f"dlq takes one reason out of {choices}")
        key = fields.get("business_key")
        items = self.engine.dlq(
            reason=reasons[0] if reasons else None,
            business_key=None if key is None else str(key),
        )
        if not items:
            self.write("the dead-letter queue is empty" if not args else "no dead letters match")
            return True
        for reason, keys in sorted(self.engine.dlq_summary().items()):
            counts = ", ".join(f"{k}: {n}" for k, n in sorted(keys.items()))
            self.write(f"  {reason}: {sum(keys.values())} ({counts})")
        headers = ("DELIVERY", "TYPE", "BUSINESS KEY", "STATE", "ATTEMPTS", "DEADLINE")
        for line in table_lines(headers, self._rows(items)):
            self.write(line)
        return True

    async def _explain(self, args: list[str]) -> bool:
        if len(args) != 1:
            raise ConfigurationError("usage: explain ID")
        self.write(self.engine.explain(args[0]))
        return True

    @staticmethod
    def _ids_and_options(
        args: list[str], names: Sequence[str], usage: str
    ) -> tuple[list[str], dict[str, str]]:
        """``ID[,ID…]`` words and the ``--name value`` (or ``--name=value``) options, all
        required."""
        ids: list[str] = []
        options = dict.fromkeys(names, "")
        words = iter(args)
        for word in words:
            name, eq, inline = word.partition("=")
            if name in options:
                value = inline if eq else next(words, None)
                if value is None:
                    raise ConfigurationError(f"{name} needs a value")
                options[name] = value
            elif word.startswith("--"):
                raise ConfigurationError(f"unknown {usage.split()[0]} option {word}")
            else:
                ids.extend(part for part in word.split(",") if part)
        missing = [name for name, value in options.items() if not value.strip()]
        if not ids or missing:
            raise ConfigurationError(
                f"usage: {usage}"
                + (f" (missing {', '.join(missing)})" if missing else " (missing ID)")
            )
        return ids, options

    async def _redrive(self, args: list[str]) -> bool:
        ids, options = self._ids_and_options(
            args, ("--actor", "--reason", "--deadline"), COMMAND_USAGE["redrive"]
        )
        self.engine.redrive(
            ids,
            actor=options["--actor"],
            reason=options["--reason"],
            deadline=options["--deadline"],
        )
        await self.engine.kick()
        return True

    async def _resend(self, args: list[str]) -> bool:
        ids, options = self._ids_and_options(args, ("--actor",), COMMAND_USAGE["resend"])
        self.engine.resend(ids, actor=options["--actor"])
        await self.engine.kick()
        return True

    async def _faults(self, args: list[str]) -> bool:
        for name, spec in self.engine.faults().items():
            state = f"ON  {spec}" if spec else "off"
            self.write(f"  {name:<24} {state:<8} {FAULT_EFFECT[name]}")
        return True

    async def _fault(self, args: list[str]) -> bool:
        if len(args) != 2 or args[0] not in ("on", "off"):
            raise ConfigurationError("usage: fault on|off NAME[:k=v,…]")
        if args[0] == "on":
            self.engine.fault_on(args[1])
        else:
            self.engine.fault_off(args[1])
        return True

    async def _help(self, args: list[str]) -> bool:
        width = max(len(usage) for _, usage, _ in COMMANDS)
        for _, usage, what in COMMANDS:
            self.write(f"  {usage:<{width}}  {what}")
        return True

    async def _quit(self, args: list[str]) -> bool:
        return False


async def interact(shell: SandboxShell, lines: AsyncIterator[str]) -> None:
    """Run every line until ``quit`` or the end of ``lines``."""
    async for line in lines:
        if not await shell.execute(line):
            return
