"""Developer sessions: ``nox -s tests``, ``nox -s lint``, ``nox -s typecheck``.

``tests`` is the command the README gives and ``.ci/run`` calls. It installs the project with its
test extra into a fresh virtual environment and runs pytest; arguments after ``--`` go to pytest.
"""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

PACKAGES = ["receiver", "sender_sim", "conformance"]
PYTHON = "3.11"
PARALLEL = ["--numprocesses", "auto", "--maxprocesses", "4", "--dist", "loadfile"]


def _install(session: nox.Session, *extras: str) -> None:
    spec = f".[{','.join(extras)}]" if extras else "."
    session.install("-e", spec)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the whole test suite (PostgreSQL tests need HOOKPROOF_TEST_POSTGRES_DSN).

    Test files run in parallel, one worker per core up to four, each file on one worker (its
    module fixtures, such as a zoo's built server, are made once); ``-- -n 0`` runs them one
    after another.
    """
    _install(session, "test")
    session.run("pytest", *PARALLEL, *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff: lint and formatting."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the three packages."""
    _install(session, "test", "dev")
    session.run("mypy", *PACKAGES)
