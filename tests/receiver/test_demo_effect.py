"""The reference app's demo effect stores: replicas that start together prepare them safely, and
the SQLite store is counted through the inbox's own read connections."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from receiver import demo_effect
from receiver.demo_effect import PostgresReminders, reminders_for
from receiver.inbox import SqliteInbox
from receiver.inbox.postgres import PostgresInbox
from tests.receiver.inbox.postgres_backend import drop_schema, fresh_schema, inbox_location


@pytest.mark.postgres
def test_replicas_preparing_the_effect_table_at_once_do_not_collide(postgres_dsn: str) -> None:
    async def scenario() -> None:
        for _ in range(5):
            schema = fresh_schema("effect_race")
            async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as c:
                await c.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            try:
                inboxes = [
                    await PostgresInbox.connect(inbox_location(postgres_dsn, schema))
                    for _ in range(6)
                ]
                try:
                    replicas = [PostgresReminders(inbox) for inbox in inboxes]
                    await asyncio.gather(*(replica.prepare() for replica in replicas))
                    assert await replicas[0].count("evt_none") == 0
                finally:
                    for inbox in inboxes:
                        await inbox.close()
            finally:
                await drop_schema(postgres_dsn, schema)

    asyncio.run(scenario())


def test_sqlite_reminders_are_counted_through_the_inbox_without_a_connection_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> int:
        inbox = SqliteInbox(tmp_path / "inbox.db")
        try:
            reminders = reminders_for(inbox, str(tmp_path / "inbox.db"))
            await reminders.prepare()
            claim = await inbox.claim("evt_counted")
            work = reminders.work("evt_counted", "ren_1", "renewal.reminder_due")
            assert await inbox.commit("evt_counted", claim.token, 200, [work])

            def no_connection(path: str) -> None:
                raise AssertionError("a probe read opened a connection of its own")

            monkeypatch.setattr(demo_effect, "connect", no_connection)
            return await reminders.count("evt_counted")
        finally:
            await inbox.close()

    assert asyncio.run(scenario()) == 1
