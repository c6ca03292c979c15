"""The hookproof pytest plugin: the conformance suite as test items in a partner's own test run.

Inert unless opted in: nothing is collected, configured or imported beyond this module unless one
of ``--hookproof-app module:attr`` (the partner's ASGI app, in process through
``httpx.ASGITransport``: no server), ``--hookproof-url URL`` (a running endpoint) or
``--hookproof`` (take both from the config file) is given. Every other setting comes from the
command line or the config file (``hookproof.toml`` / ``[tool.hookproof]``; ``${ENV}`` allowed),
flags winning. The app is imported the way ``uvicorn`` imports one: with the rootdir on
``sys.path``; an app that cannot be imported is one usage error, not one failure per scenario.
Each scenario becomes one test item (``hookproof::<scenario id>``); a failure carries the same
text as ``hookproof check``: the guarantee, what was expected, what came back and the ``curl``
reproduction.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest

__all__ = ["HookproofItem", "pytest_addoption", "pytest_configure"]

_BASE = "http://hookproof.test"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hookproof", "webhook receiver conformance (hookproof)")
    group.addoption(
        "--hookproof",
        action="store_true",
        default=False,
        help="Run the hookproof suite with settings from the config file.",
    )
    group.addoption(
        "--hookproof-app",
        default=None,
        metavar="MODULE:ATTR",
        help="Check this ASGI app in process (no server).",
    )
    group.addoption(
        "--hookproof-url", default=None, metavar="URL", help="Check the webhook endpoint at URL."
    )
    group.addoption(
        "--hookproof-path",
        default=None,
        metavar="PATH",
        help="The app's webhook path (default /webhooks).",
    )
    group.addoption(
        "--hookproof-secret",
        action="append",
        default=[],
        metavar="SECRET",
        help="Signing secret (repeatable).",
    )
    group.addoption(
        "--hookproof-scheme",
        default=None,
        metavar="SCHEME",
        # checked against the scheme registry when the plugin is opted in (importing it here
        # would load hookproof in every pytest run): an unknown name is one usage error
        help="The signing scheme: standard (default), svix, stripe or github.",
    )
    group.addoption(
        "--hookproof-probe",
        default=None,
        metavar="URL_PREFIX",
        help="Probe prefix (a path is resolved against the app).",
    )
    group.addoption("--hookproof-probe-token", default=None, metavar="TOKEN")
    group.addoption("--hookproof-select", action="append", default=[], metavar="SELECTOR")
    group.addoption("--hookproof-deselect", action="append", default=[], metavar="SELECTOR")
    group.addoption(
        "--hookproof-timeout",
        default=None,
        metavar="DURATION",
        help="Each exchange's total deadline: seconds, or 250ms, 30s (default 5).",
    )
    group.addoption(
        "--hookproof-settle",
        default=None,
        metavar="DURATION",
        help="How long an effect may lag its 2xx (a durable queue): 2s, 500ms (default 0).",
    )
    group.addoption("--hookproof-config", default=None, metavar="FILE")
    group.addoption("--hookproof-show-secrets", action="store_true", default=None)


def _opted_in(config: pytest.Config) -> bool:
    return bool(
        config.getoption("hookproof")
        or config.getoption("hookproof_app")
        or config.getoption("hookproof_url")
    )


def pytest_configure(config: pytest.Config) -> None:
    if _opted_in(config):
        config.pluginmanager.register(_Session(config), "hookproof-session")


class _Session:
    """The opted-in run: settings, the scenario plan, and one event loop shared by the items."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stack: contextlib.AsyncExitStack | None = None
        self.harness: Any = None
        self.failure: str | None = None
        self.app: Any = None
        self.scenarios: list[Any] = []
        """The planned scenarios (their early steps are sent when the harness opens)."""

    def import_app(self, spec: str) -> Any:
        """The partner's app, imported with the rootdir on ``sys.path`` (as ``uvicorn`` does)."""
        from conformance.asgi import import_app

        root = str(self.config.rootpath)
        if root not in sys.path:
            sys.path.insert(0, root)
        return import_app(spec)

    def settings(self) -> Any:
        from conformance.config import CheckSettings, load_config
        from conformance.exceptions import UsageError
        from receiver.durations import parse_seconds

        option = self.config.getoption
        file_values = load_config(option("hookproof_config"), cwd=self.config.rootpath)

        def seconds(name: str) -> float | None:
            text = option(name)
            if text is None:
                return None
            try:
                return parse_seconds(text)
            except ValueError as error:
                raise UsageError(f"--{name.replace('_', '-')}: {error}") from None

        settings = (
            CheckSettings()
            .merged(file_values)
            .merged(
                {
                    "url": option("hookproof_url"),
                    "app": option("hookproof_app"),
                    "path": option("hookproof_path"),
                    "secrets": tuple(option("hookproof_secret")),
                    "scheme": option("hookproof_scheme"),
                    "probe": option("hookproof_probe"),
                    "probe_token": option("hookproof_probe_token"),
                    "select": tuple(option("hookproof_select")),
                    "deselect": tuple(option("hookproof_deselect")),
                    "timeout": seconds("hookproof_timeout"),
                    "settle": seconds("hookproof_settle"),
                    "show_secrets": option("hookproof_show_secrets"),
                }
            )
        )
        if settings.app and not option("hookproof_url"):
            path = settings.path or "/webhooks"
            probe = settings.probe
            if probe and probe.startswith("/"):
                probe = _BASE + probe
            settings = settings.merged({"url": _BASE + path, "probe": probe})
        return settings.validate()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        from conformance.exceptions import ConformanceError
        from conformance.session import plan

        try:
            settings = self.settings()
            scenarios = plan(settings)
            if settings.app and not self.config.getoption("hookproof_url"):
                self.app = self.import_app(settings.app)
        except ConformanceError as error:
            raise pytest.UsageError(f"hookproof: {error}") from None
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        for warning in settings.warnings():  # said once, before the run, as `hookproof check` does
            if reporter is not None:
                reporter.write_line(f"hookproof: warning: {warning}", yellow=True)
        collector = HookproofCollector.from_parent(session, name="hookproof", nodeid="hookproof")
        items.extend(
            HookproofItem.from_parent(collector, name=s.id, scenario=s, owner=self)
            for s in scenarios
        )

    @pytest.hookimpl
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The scenarios still to run once ``-k``, ``-m`` and ``--deselect`` have had their say:
        only theirs are sent early (a deselected scenario's first copy would be sent for
        nothing, and its id met by the receiver without the duplicate that should follow)."""
        items = session.items
        self.scenarios = [item.scenario for item in items if isinstance(item, HookproofItem)]

    def run(self, scenario: Any) -> Any:
        """Run one scenario on the shared loop (opening the client the first time)."""
        if self.failure is not None:
            raise HookproofFailure(self.failure)
        if self.loop is None:
            self.loop = asyncio.new_event_loop()
            try:
                self.harness = self.loop.run_until_complete(self._open())
            except Exception as error:
                from conformance.exceptions import ConformanceError

                if not isinstance(error, ConformanceError):
                    raise
                self.failure = f"hookproof: {error}"
                raise HookproofFailure(self.failure) from None
        return self.loop.run_until_complete(self.harness.run(scenario))

    async def _open(self) -> Any:
        from conformance.asgi import app_client
        from conformance.model import Harness
        from conformance.session import open_http_harness, wire_options

        settings = self.settings()
        self.stack = contextlib.AsyncExitStack()
        client = None
        if settings.app and not self.config.getoption("hookproof_url"):
            app = self.app if self.app is not None else self.import_app(settings.app)
            client = await self.stack.enter_async_context(app_client(app, _BASE))
        seed = settings.seed if settings.seed is not None else 0
        options = wire_options(settings, seed=seed)
        harness = await self.stack.enter_async_context(
            open_http_harness(settings, options, Harness.C, client=client)
        )
        await harness.deliver_early(self.scenarios)  # as `hookproof check` does
        return harness

    @pytest.hookimpl
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.loop is not None:
            if self.stack is not None:
                self.loop.run_until_complete(self.stack.aclose())
            self.loop.close()
            self.loop = None


class HookproofFailure(Exception):
    """A scenario that failed (or could not run): its report is the message."""


class HookproofCollector(pytest.Collector):
    """The parent of the hookproof items (``hookproof::<id>``)."""

    def collect(self) -> Iterator[pytest.Item]:  # pragma: no cover - items are added directly
        return iter(())


class HookproofItem(pytest.Item):
    """One scenario of the catalogue as a test item."""

    def __init__(self, *, scenario: Any, owner: _Session, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.owner = owner

    def runtest(self) -> None:
        from conformance.reporters.text import describe_result
        from conformance.results import Outcome

        result = self.owner.run(self.scenario)
        if result.outcome is Outcome.SKIPPED:
            pytest.skip(result.message)
        if result.outcome in (Outcome.FAILED, Outcome.ERROR):
            raise HookproofFailure(describe_result(result))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, HookproofFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[str, int | None, str]:
        return "hookproof", None, f"hookproof: {self.scenario.id}"
