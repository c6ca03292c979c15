"""The conformance package's one exception hierarchy.

Every failure of the runner itself (as opposed to a broken guarantee of the endpoint under test,
which is a *result*, not an error) is one of these::

    ConformanceError
    ├── UsageError               a bad flag, selector, template or config file (exit status 2)
    │   └── ConfigError          the config file cannot be read, parsed or substituted
    ├── EndpointUnreachable      the endpoint never answered (exit status 2)
    ├── CatalogueError           the scenario catalogue is inconsistent (a bug, caught by tests)
    └── HarnessError             a scenario could not be run (reported as an ``error`` outcome)

The root CLI catches :class:`ConformanceError` by name and prints one line; messages never
contain a secret.
"""

from __future__ import annotations

__all__ = [
    "CatalogueError",
    "ConfigError",
    "ConformanceError",
    "EndpointUnreachable",
    "HarnessError",
    "UsageError",
]


class ConformanceError(Exception):
    """Root of every error raised by the ``conformance`` package."""


class UsageError(ConformanceError):
    """A flag, selector, template or option is unusable."""


class ConfigError(UsageError):
    """The configuration file cannot be read, parsed, or has a missing ``${ENV}`` variable."""


class EndpointUnreachable(ConformanceError):
    """The endpoint under test never answered (connection refused, timeouts, 503 throughout)."""


class CatalogueError(ConformanceError):
    """The scenario catalogue is inconsistent: a duplicate id, an unknown action or check."""


class HarnessError(ConformanceError):
    """A scenario could not be run to a verdict (a runner problem, not a broken guarantee)."""
