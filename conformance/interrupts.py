"""Ctrl-C during a run: the run's task is cancelled *as an interrupt*, so it ends as
``interrupted`` (not ``cancelled``), writes its reports, and the command exits 130.

``asyncio.run`` turns SIGINT into a plain cancellation of its main task, which the engine cannot
tell from any other cancellation. :func:`run_interruptibly` cancels the task with
:data:`INTERRUPT_MESSAGE` instead (where the loop can take signal handlers), and
:func:`is_interrupt` is how the engine recognises it. Afterwards the interrupt reaches the caller
as :class:`KeyboardInterrupt`, so a command still stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Coroutine
from typing import Any, Final, TypeVar

__all__ = ["INTERRUPT_MESSAGE", "is_interrupt", "run_interruptibly"]

T = TypeVar("T")

INTERRUPT_MESSAGE: Final = "hookproof: interrupted (Ctrl-C)"
"""The cancellation message of a run stopped by Ctrl-C."""


def is_interrupt(stop: BaseException) -> bool:
    """Whether ``stop`` is a Ctrl-C: a ``KeyboardInterrupt``, or the cancellation that
    :func:`run_interruptibly` makes of one."""
    if isinstance(stop, KeyboardInterrupt):
        return True
    return isinstance(stop, asyncio.CancelledError) and INTERRUPT_MESSAGE in stop.args


def run_interruptibly(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, with Ctrl-C cancelling ``main`` as an interrupt; raises
    :class:`KeyboardInterrupt` once ``main`` has ended after one (its reports written)."""
    interrupted = False

    async def guarded() -> T:
        nonlocal interrupted
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()

        def interrupt() -> None:
            nonlocal interrupted
            if interrupted:  # a second Ctrl-C: the default behaviour, stop at once
                raise KeyboardInterrupt
            interrupted = True
            task.cancel(INTERRUPT_MESSAGE)

        try:
            loop.add_signal_handler(signal.SIGINT, interrupt)
        except (NotImplementedError, RuntimeError, ValueError):  # no signals here (Windows,
            return await main  # not the main thread): asyncio.run's own handling stands
        try:
            return await main
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signal.SIGINT)

    try:
        return asyncio.run(guarded())
    except asyncio.CancelledError:
        if interrupted:
            raise KeyboardInterrupt from None
        raise
