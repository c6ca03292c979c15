"""Rows as data for the PostgreSQL inbox: :class:`PostgresInsert`, and how commits fold them in.

A :class:`PostgresInsert` work is data, so :class:`~receiver.inbox.postgres.PostgresInbox` writes
it in the commit statement itself instead of running it in a transaction:

- one delivery's commit (:meth:`PostgresInsert.folded`): each row is a data-modifying CTE that
  selects its values from ``done``, the compare-and-set ``UPDATE`` — it writes exactly when the
  token is current;
- a batch of deliveries' commits (:func:`grouped_inserts`): the rows of every delivery are grouped
  by target table, columns and the Python types of their values, one ``INSERT … SELECT … FROM
  (VALUES …)`` per group, each row tagged with its event id and kept only if that id is in
  ``done``.

Values keep the types the one-row form gives them: a ``VALUES`` list would turn untyped literals
(psycopg sends ``str`` untyped) into ``text``, so the group's first ``VALUES`` row is a typing row
of NULLs of the target columns' own types (``(NULL::table).column``, never inserted), and the
other rows' literals are resolved against it as an ``INSERT`` resolves them. Rows of different
Python types are never grouped together, so no value is converted through another row's type. A
value the grouped form cannot type fails the batch's statement, and the batch is then committed
delivery by delivery (the one-row form).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from receiver.inbox.contract import RowInsert

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.sql import Composed

__all__ = ["PostgresInsert", "grouped_inserts"]


@dataclass(frozen=True)
class PostgresInsert(RowInsert):
    """Transactional work that inserts one row: ``INSERT INTO table (columns) VALUES (values)``.

    As a work it is data, so :meth:`PostgresInbox.commit` folds it into its commit statement
    (one round trip instead of ``BEGIN``, the update, the insert and ``COMMIT``; with concurrent
    deliveries, one statement for the whole batch). Called with a connection it runs the insert
    there, like any other work. ``table`` may be qualified (``schema.table``); unqualified, it is
    found on the inbox's ``search_path``. Values are sent with psycopg's types (text, numbers,
    timestamps …), selected into the columns.
    """

    def __call__(self, conn: AsyncConnection[Any]) -> Any:
        from psycopg import sql

        placeholders = sql.SQL(", ").join(sql.Placeholder() * len(self.values))
        statement = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            self._table(), self._columns(), placeholders
        )
        return conn.execute(statement, self.values)

    def _table(self) -> Composed:
        from psycopg import sql

        return sql.SQL(".").join(sql.Identifier(part) for part in self.table.split("."))

    def _columns(self) -> Composed:
        from psycopg import sql

        return sql.SQL(", ").join(sql.Identifier(column) for column in self.columns)

    def folded(self, name: str, params: dict[str, Any]) -> Composed:
        """This insert as the CTE ``name`` of a folded commit (its values added to ``params``
        as ``name_0``, ``name_1`` …): it writes its row only if ``done`` has one."""
        from psycopg import sql

        keys = [f"{name}_{n}" for n in range(len(self.values))]
        params.update(zip(keys, self.values, strict=True))
        values = sql.SQL(", ").join(sql.Placeholder(key) for key in keys)
        return sql.SQL(",\n{} AS (INSERT INTO {} ({}) SELECT {} FROM done)").format(
            sql.Identifier(name), self._table(), self._columns(), values
        )


Literal = Callable[[Any], bytes]
"""Renders one value as an SQL literal (psycopg's ``Transformer.as_literal`` for the connection)."""


def grouped_inserts(rows: Iterable[tuple[bytes, PostgresInsert]], literal: Literal) -> bytes:
    """The CTEs (``, i0 AS (…), i1 AS (…)``) that insert ``rows`` of a batched commit, each
    ``(event id as a literal, insert)`` row only if that event id is in ``done``."""
    groups: dict[tuple[str, tuple[str, ...], tuple[type, ...]], list[bytes]] = {}
    for key, row in rows:
        values = b", ".join(b"NULL" if value is None else literal(value) for value in row.values)
        group = (row.table, row.columns, tuple(map(type, row.values)))
        groups.setdefault(group, []).append(b"(" + key + b", " + values + b")")
    ctes = []
    for n, ((table, columns, _), members) in enumerate(groups.items()):
        head, typing_row, tail = _group_sql(table, columns)
        body = b", ".join(members)
        ctes.append(b",\ni%d AS (%b%b, %b%b)" % (n, head, typing_row, body, tail))
    return b"".join(ctes)


@lru_cache(maxsize=256)
def _group_sql(table: str, columns: tuple[str, ...]) -> tuple[bytes, bytes, bytes]:
    """The fixed parts of one group's ``INSERT``: up to ``VALUES``, the typing row, the rest."""
    from psycopg import sql

    target = sql.SQL(".").join(sql.Identifier(part) for part in table.split(".")).as_bytes(None)
    names = [sql.Identifier(column).as_bytes(None) for column in columns]
    aliases = [b"c%d" % n for n in range(len(columns))]
    head = b"INSERT INTO %b (%b) SELECT %b FROM (VALUES " % (
        target,
        b", ".join(names),
        b", ".join(b"v." + alias for alias in aliases),
    )
    typing_row = b"(NULL, %b)" % b", ".join(b"(NULL::%b).%b" % (target, name) for name in names)
    tail = b") AS v(k, %b) WHERE v.k IN (SELECT event_id FROM done)" % b", ".join(aliases)
    return head, typing_row, tail
