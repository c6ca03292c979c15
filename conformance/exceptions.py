"""The conformance package's one exception hierarchy.

Every failure of the runner itself (as opposed to a broken guarantee of the endpoint under test,
which is a *result*, not an error) is one of these::

    ConformanceError
    ├── UsageError               a bad flag, selector, template or config file (exit status 2)
    │   └── ConfigError          the config file cannot be read, parsed or substituted
    ├── EndpointUnreachable      the endpoint never answered (exit status 2)
    ├── ProbeUnusable            the probe refused the token or breaks its contract (exit status 2)
    ├── CatalogueError           the scenario catalogue is inconsistent (a bug, caught by tests)
    ├── HarnessError             a scenario could not be run (reported as an ``error`` outcome)
    └── DeadlineExceeded         a request got no complete answer within its total deadline
                                 (also a ``TimeoutError``; recorded as an exchange, never raised
                                 out of a run)

The root CLI catches :class:`ConformanceError` by name and prints one line; messages never
contain a secret.
"""

from __future__ import annotations

__all__ = [
    "CatalogueError",
    "ConfigError",
    "ConformanceError",
    "DeadlineExceeded",
    "EndpointUnreachable",
    "HarnessError",
    "ProbeUnusable",
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


class ProbeUnusable(ConformanceError):
    """The probe refused the token, or answers outside the probe contract (checked once, before
    the first scenario, so a wrong token is one error and not one per scenario)."""


class CatalogueError(ConformanceError):
    """The scenario catalogue is inconsistent: a duplicate id, an unknown action or check."""


class HarnessError(ConformanceError):
    """A scenario could not be run to a verdict (a runner problem, not a broken guarantee)."""


class DeadlineExceeded(ConformanceError, TimeoutError):
    """No complete answer within the request's total deadline (connect, send, whole body).

    ``status`` is the answer's status when its head arrived but its body did not finish, and
    ``None`` when nothing answered at all.
    """

    def __init__(self, timeout_s: float, status: int | None) -> None:
        self.timeout_s = timeout_s
        self.status = status
        super().__init__(self.describe())

    def describe(self) -> str:
        # sender_sim's words for it (imported here: this module stays free of the package)
        from sender_sim.exceptions import lateness

        return lateness(self.timeout_s, self.status)
