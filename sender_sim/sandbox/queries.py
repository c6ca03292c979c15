"""The sandbox's one import point for the library's monitor rows, CSV export and resend.

Nothing here re-implements them: the dashboard, its JSON API and the terminal call
:meth:`Simulator.rows <sender_sim.simulator.Simulator.rows>`,
:meth:`~sender_sim.simulator.Simulator.export_csv` and
:meth:`~sender_sim.simulator.Simulator.resend`, so they share the CLI's semantics
(``hookproof deliveries list|export``, ``hookproof resend``): the same filter names
(:class:`RowFilter`'s fields), row kinds, statuses, HTTP classes, CSV columns, the 5000-row cap
(:class:`ExportTooLarge`, ``EXPORT_TOO_LARGE``), and resend's eligibility and refusal reasons
(:class:`ResendRefused`, ``WEBHOOK_DELIVERY_NOT_REPLAYABLE``). The only addition is the list's
order: the dashboard shows the newest rows first (:func:`newest_first`).
"""

from __future__ import annotations

from sender_sim.exceptions import ExportTooLarge, ResendRefused
from sender_sim.inspection import (
    CSV_COLUMNS,
    EXPORT_LIMIT,
    HTTP_CLASSES,
    STATUSES,
    Row,
    RowFilter,
    RowKind,
    row_json,
)
from sender_sim.redrive import MAX_BATCH as RESEND_LIMIT
from sender_sim.resend import ResendResult
from sender_sim.simulator import Simulator

__all__ = [
    "CSV_COLUMNS",
    "EXPORT_LIMIT",
    "FILTER_FIELDS",
    "HTTP_CLASSES",
    "RESEND_LIMIT",
    "STATUSES",
    "ExportTooLarge",
    "ResendRefused",
    "ResendResult",
    "Row",
    "RowFilter",
    "RowKind",
    "newest_first",
    "row_json",
]

FILTER_FIELDS: tuple[str, ...] = tuple(RowFilter.__dataclass_fields__)
"""The filters' names (the query parameters of the list, the export and ``/api/deliveries``)."""


def newest_first(sim: Simulator, where: RowFilter | None, limit: int) -> list[Row]:
    """The library's rows for ``where``, newest first, at most ``limit``."""
    return list(reversed(sim.rows(where)))[:limit]
