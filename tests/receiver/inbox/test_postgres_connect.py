"""The PostgreSQL inbox's start-up and resilience: migrations, clear configuration errors, outages.

A misconfigured database must be ONE readable :class:`ConfigurationError` at ``connect()``; a
database that goes away while running must turn operations into :class:`InboxUnavailable` (never
a silent success) and the inbox must recover by itself. Connections are killed with
``pg_terminate_backend``, restricted to the test's own ``application_name``.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from conformance.cli import main
from receiver.exceptions import ConfigurationError, InboxUnavailable
from receiver.inbox import ClaimOutcome, RecordState
from receiver.inbox.factory import open_inbox
from receiver.inbox.postgres import PostgresInbox, parse_location
from receiver.inbox.postgres_schema import MIGRATIONS, MIGRATIONS_TABLE, latest_version, migrate
from tests.receiver.inbox.backends import FakeClock
from tests.receiver.inbox.postgres_backend import (
    drop_schema,
    fresh_schema,
    inbox_location,
    terminate_backends,
)

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

LEASE = timedelta(seconds=30)


@pytest.fixture
async def schema(postgres_dsn: str) -> AsyncIterator[str]:
    name = fresh_schema("connect")
    try:
        yield name
    finally:
        await drop_schema(postgres_dsn, name)


@pytest.fixture
def application_name() -> str:
    return f"hp-test-{uuid.uuid4().hex[:10]}"


async def _rows(dsn: str, query: sql.Composable, *params: Any) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cursor = await conn.execute(query, params or None)
        return await cursor.fetchall()


async def test_replicas_starting_at_once_migrate_exactly_once(
    postgres_dsn: str, schema: str
) -> None:
    location = inbox_location(postgres_dsn, schema, pool_max_size=2)
    replicas = await asyncio.gather(*(PostgresInbox.connect(location) for _ in range(5)))
    try:
        applied = await _rows(
            postgres_dsn,
            sql.SQL("SELECT version FROM {}.{} ORDER BY version").format(
                sql.Identifier(schema), sql.Identifier(MIGRATIONS_TABLE)
            ),
        )
        assert [version for (version,) in applied] == [m.version for m in MIGRATIONS]
        claims = await asyncio.gather(*(replica.claim("evt_m") for replica in replicas))
        assert sum(c.outcome is ClaimOutcome.CLAIMED for c in claims) == 1
    finally:
        for replica in replicas:
            await replica.close()
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as conn:
        assert await migrate(conn, schema) == latest_version()  # nothing left to apply


async def test_a_schema_newer_than_the_code_is_refused(postgres_dsn: str, schema: str) -> None:
    location = inbox_location(postgres_dsn, schema)
    await (await PostgresInbox.connect(location)).close()
    await _rows(
        postgres_dsn,
        sql.SQL(
            "INSERT INTO {}.{} (version, name) VALUES (%s, 'from the future') RETURNING 1"
        ).format(sql.Identifier(schema), sql.Identifier(MIGRATIONS_TABLE)),
        latest_version() + 1,
    )
    with pytest.raises(ConfigurationError, match="newer than this hookproof"):
        await PostgresInbox.connect(location)


async def test_search_path_in_libpq_options_selects_the_schema(
    postgres_dsn: str, schema: str
) -> None:
    separator = "&" if "?" in postgres_dsn else "?"
    location = f"{postgres_dsn}{separator}options=-csearch_path%3D{schema}"
    assert parse_location(location).schema == schema
    async with await PostgresInbox.connect(location) as inbox:
        assert isinstance(inbox, PostgresInbox)
        assert inbox.schema == schema
        await inbox.claim("evt_o")
    tables = await _rows(
        postgres_dsn,
        sql.SQL("SELECT count(*) FROM {}.hookproof_inbox").format(sql.Identifier(schema)),
    )
    assert tables == [(1,)]


async def test_open_inbox_selects_postgres_and_names_its_connections(
    postgres_dsn: str, schema: str, application_name: str
) -> None:
    location = inbox_location(postgres_dsn, schema, application_name=application_name)
    inbox = await open_inbox(location, lease=LEASE)
    try:
        assert isinstance(inbox, PostgresInbox)
        assert inbox.lease == LEASE
        await inbox.claim("evt_n")
        sessions = await _rows(
            postgres_dsn,
            sql.SQL("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"),
            application_name,
        )
        assert sessions[0][0] >= 1
    finally:
        await inbox.close()
        await inbox.close()  # idempotent
    with pytest.raises(InboxUnavailable, match="closed"):
        await inbox.claim("evt_n")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda dsn: dsn.replace(":5432", ":1").replace("postgres@", "postgres:pw-s3cret@"),
            "reach",
        ),
        (lambda dsn: dsn.rsplit("/", 1)[0] + "/hp_no_such_database", "hp_no_such_database"),
        (lambda dsn: dsn + ("&" if "?" in dsn else "?") + "bogus_parameter=1", "bogus_parameter"),
        (lambda dsn: dsn + ("&" if "?" in dsn else "?") + "schema=bad;name", "schema name"),
        (lambda dsn: dsn + ("&" if "?" in dsn else "?") + "pool_max_size=0", "pool_max_size"),
        (lambda dsn: dsn.replace("postgresql://", "mysql://", 1), "postgresql://"),
    ],
)
async def test_a_misconfigured_database_is_one_readable_configuration_error(
    postgres_dsn: str, change: Any, expected: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        await PostgresInbox.connect(change(postgres_dsn), connect_timeout=3)
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message
    assert "pw-s3cret" not in message


def test_an_unknown_database_is_one_line_and_exit_2_from_the_cli(
    postgres_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    location = postgres_dsn.rsplit("/", 1)[0] + "/hp_no_such_database"
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    assert main(["receiver", "--secret", secret, "--db", location]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "hp_no_such_database" in err[0]


async def test_without_psycopg_the_backend_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, postgres_dsn: str
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ConfigurationError, match=r"hookproof\[postgres\]"):
        await PostgresInbox.connect(postgres_dsn)


async def test_terminated_connections_are_replaced_without_failing_a_request(
    postgres_dsn: str, schema: str, application_name: str
) -> None:
    location = inbox_location(postgres_dsn, schema, application_name=application_name)
    async with await PostgresInbox.connect(location, check_idle_after=0) as inbox:
        for n in range(4):
            await inbox.claim(f"evt_warm{n}")
        assert await terminate_backends(postgres_dsn, application_name) >= 1
        # Connections idle for check_idle_after (here 0 s) are checked as they are handed
        # out: the dead ones are replaced before any operation sees them.
        claim = await inbox.claim("evt_after")
        assert claim.outcome is ClaimOutcome.CLAIMED


async def test_a_lost_connection_is_inbox_unavailable_then_the_pool_recovers(
    postgres_dsn: str, schema: str, application_name: str
) -> None:
    location = inbox_location(
        postgres_dsn, schema, application_name=application_name, pool_min_size=1, pool_max_size=1
    )
    inbox = await PostgresInbox.connect(location, check_idle_after=None)
    try:
        await inbox.claim("evt_before")
        assert await terminate_backends(postgres_dsn, application_name) == 1
        with pytest.raises(InboxUnavailable, match="unavailable") as caught:
            await inbox.claim("evt_during")
        assert "\n" not in str(caught.value)
        assert await _eventually(lambda: inbox.claim("evt_during")) == ClaimOutcome.CLAIMED
        record = await inbox.lookup("evt_during")
        assert record is not None
        assert record.deliveries == 1  # the failed claim left nothing behind
    finally:
        await inbox.close()


async def test_a_commit_whose_connection_dies_is_unavailable_and_not_committed(
    postgres_dsn: str, schema: str, application_name: str
) -> None:
    location = inbox_location(postgres_dsn, schema, application_name=application_name)
    clock = FakeClock()
    async with await PostgresInbox.connect(location, lease=LEASE, clock=clock) as inbox:
        claim = await inbox.claim("evt_die")

        async def killed_mid_transaction(conn: psycopg.AsyncConnection[Any]) -> None:
            await conn.execute("CREATE TABLE IF NOT EXISTS doomed (x int)")
            await terminate_backends(postgres_dsn, application_name)
            await conn.execute("INSERT INTO doomed VALUES (1)")

        with pytest.raises(InboxUnavailable):
            await inbox.commit("evt_die", claim.token, 200, [killed_mid_transaction])
        record = await _eventually(lambda: inbox.lookup("evt_die"))
        assert record is not None
        assert (record.state, record.effects) == (RecordState.IN_FLIGHT, 0)
        assert await inbox.commit("evt_die", claim.token, 200) is True


async def test_an_exhausted_pool_is_unavailable_quickly_not_a_hang(
    postgres_dsn: str, schema: str
) -> None:
    location = inbox_location(postgres_dsn, schema, pool_max_size=1, pool_timeout=0.2)
    async with await PostgresInbox.connect(location) as inbox:
        claim = await inbox.claim("evt_hold")
        holding, release = asyncio.Event(), asyncio.Event()

        async def hold(conn: psycopg.AsyncConnection[Any]) -> None:
            holding.set()
            await release.wait()

        committing = asyncio.create_task(inbox.commit("evt_hold", claim.token, 200, [hold]))
        await holding.wait()
        with pytest.raises(InboxUnavailable):
            await inbox.claim("evt_other")
        release.set()
        assert await committing is True
        assert (await inbox.claim("evt_other")).outcome is ClaimOutcome.CLAIMED


async def _eventually(operation: Any, attempts: int = 100) -> Any:
    """``operation()``'s value once it stops raising InboxUnavailable (the pool reconnecting)."""
    for _ in range(attempts):
        try:
            result = await operation()
        except InboxUnavailable:
            await asyncio.sleep(0.05)  # real-time: the pool reconnects on its own schedule
            continue
        return getattr(result, "outcome", result)
    raise AssertionError("the inbox did not recover")


async def test_a_role_without_create_on_the_database_uses_a_schema_made_for_it(
    postgres_dsn: str, schema: str
) -> None:
    role = f"hp_role_{uuid.uuid4().hex[:8]}"
    admin = await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True)
    try:
        await admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        await admin.execute(
            sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                sql.Identifier(schema), sql.Identifier(role)
            )
        )
        parts = urlsplit(postgres_dsn)
        as_role = urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port}"))
        async with await PostgresInbox.connect(inbox_location(as_role, schema)) as inbox:
            assert (await inbox.claim("evt_role")).outcome is ClaimOutcome.CLAIMED
        with pytest.raises(ConfigurationError, match="permission denied"):
            await PostgresInbox.connect(inbox_location(as_role, schema + "_other"))
    finally:
        await admin.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )
        await admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        await admin.close()


class _Proxy:
    """A loopback TCP relay to PostgreSQL that can be cut (connections reset, port refused)."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def up(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def down(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        await self._server.wait_closed()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                sink.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


async def test_a_database_that_goes_away_is_unavailable_then_recovers_by_itself(
    postgres_dsn: str, schema: str
) -> None:
    parts = urlsplit(postgres_dsn)
    proxy = _Proxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    await proxy.up()
    via_proxy = urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxy.port}"))
    location = inbox_location(via_proxy, schema, pool_timeout=0.5)
    inbox = await PostgresInbox.connect(location, lease=LEASE, clock=FakeClock())
    try:
        first = await inbox.claim("evt_kept")
        assert await inbox.commit("evt_kept", first.token, 201) is True
        await proxy.down()  # every connection reset, the port refuses new ones
        loop = asyncio.get_running_loop()
        for n in range(3):
            started = loop.time()
            with pytest.raises(InboxUnavailable):
                await inbox.claim(f"evt_down{n}")
            assert loop.time() - started < 3  # an answer, not a hang
        await proxy.up()
        started = loop.time()
        assert await _eventually(lambda: inbox.claim("evt_back")) == ClaimOutcome.CLAIMED
        assert loop.time() - started < 6  # about pool_reconnect_timeout, plus the pool wait
        replay = await inbox.claim("evt_kept")
        assert (replay.outcome, replay.status) == (ClaimOutcome.COMMITTED, 201)
    finally:
        await inbox.close()
        await proxy.down()
