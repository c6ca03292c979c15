"""The SQLite inbox's health: is the file it writes still the one at its path, and is it intact?

Two failures an open SQLite connection cannot see by itself:

* **The file disappears while running.** Remove the database's folder (or replace the file) and
  the open connection goes on writing — and fsyncing — into an unlinked inode: every commit
  "succeeds", and after a restart the events it acknowledged are gone. :class:`FileWatch`
  remembers the device and inode of the file at the configured path when the inbox opens it;
  :meth:`FileWatch.problem` compares them with the path's current ones. The inbox asks after
  every group-commit batch (before any answer of that batch leaves) and ``/healthz`` asks on
  every call; a mismatch fails the batch with :class:`~receiver.exceptions.InboxUnavailable`
  (503) and is logged once, in one line, when first seen.
* **A damaged file at start-up.** A corrupted inbox table opens fine and then fails every
  delivery. :func:`check_integrity` runs ``PRAGMA quick_check`` on the inbox table when the inbox
  opens, bounded by a time budget (a huge healthy file is not refused because checking it takes
  long: past the budget the check stops and the inbox opens, with one warning line), and refuses
  a damaged file with one :class:`~receiver.exceptions.ConfigurationError` line.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from typing import Final

from receiver.exceptions import ConfigurationError, InboxUnavailable

__all__ = ["INTEGRITY_BUDGET_S", "FileWatch", "check_integrity"]

logger = logging.getLogger("hookproof.receiver")

INTEGRITY_BUDGET_S: Final = 10.0
"""The longest the start-up integrity check may run before the inbox opens unchecked."""
_TABLE: Final = "hookproof_inbox"
_PROGRESS_STEPS: Final = 10_000


class FileWatch:
    """The identity (device, inode) of the file at ``path`` when the inbox opened it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.identity = self._identity()
        self._reported = False

    def _identity(self) -> tuple[int, int] | None:
        try:
            status = os.stat(self.path)
        except OSError:
            return None
        return status.st_dev, status.st_ino

    def problem(self) -> str | None:
        """Why the open file is no longer the one at ``path`` (``None`` while it still is)."""
        current = self._identity()
        if current == self.identity and current is not None:
            return None
        if current is None:
            reason = f"the inbox file {self.path!r} is gone; nothing can be recorded durably"
        else:
            reason = f"the inbox file {self.path!r} was replaced; the open file is no longer it"
        if not self._reported:
            self._reported = True
            logger.error("%s: answering 503 until the receiver is restarted", reason)
        return reason

    def check(self) -> None:
        """Raise :class:`InboxUnavailable` when :meth:`problem` has something to say."""
        reason = self.problem()
        if reason is not None:
            raise InboxUnavailable(reason)


def check_integrity(
    conn: sqlite3.Connection, path: str, *, budget_s: float = INTEGRITY_BUDGET_S
) -> None:
    """Run a bounded ``PRAGMA quick_check`` of the inbox table; a damaged file is refused."""
    deadline = time.monotonic() + budget_s
    timed_out = False

    def progress() -> int:
        nonlocal timed_out
        timed_out = time.monotonic() > deadline
        return 1 if timed_out else 0

    conn.set_progress_handler(progress, _PROGRESS_STEPS)
    try:
        rows = conn.execute(f"PRAGMA quick_check({_TABLE})").fetchall()
    except sqlite3.OperationalError as error:
        if timed_out:
            logger.warning(
                "the integrity check of %r stopped after %g s; opening it unchecked", path, budget_s
            )
            return
        raise _damaged(path, str(error)) from None
    except sqlite3.DatabaseError as error:
        raise _damaged(path, str(error)) from None
    finally:
        conn.set_progress_handler(None, 0)
    findings = [str(row[0]) for row in rows]
    if findings != ["ok"]:
        raise _damaged(path, "; ".join(findings[:3]))


def _damaged(path: str, finding: str) -> ConfigurationError:
    first = finding.splitlines()[0] if finding else "quick_check failed"
    return ConfigurationError(
        f"the SQLite inbox at {path!r} is damaged ({first}); "
        "restore it from a backup or move it aside before starting"
    )
