"""The reference app's demo effect stores: replicas that start together prepare them safely."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from psycopg import sql

from receiver.demo_effect import PostgresReminders
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
