"""``hookproof receiver``: serve the reference receiver app over HTTP.

Everything is validated before uvicorn starts — the secrets (by building the verifier), the
options, the listening socket, and the inbox database (opened and closed once in a throwaway event
loop) — so a bad flag, an invalid secret or an unopenable database is one readable line and exit
status 2 (``conformance.cli.main`` prints every :class:`~receiver.exceptions.ReceiverError` so).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import click

from receiver.app import DEFAULT_DB, ReceiverSettings, build_verifier, create_app
from receiver.commands.console import make_console
from receiver.commands.options import db_option, required_secrets, scheme_option, secret_option
from receiver.exceptions import ConfigurationError, ReceiverError
from receiver.middleware import DEFAULT_MAX_BODY
from receiver.probe import DEFAULT_PROBE_PREFIX
from receiver.redaction import REDACTED, shown_url, url_credentials
from receiver.server import base_url, bind_socket, serve
from receiver.signing import DEFAULT_TOLERANCE_S

__all__ = ["check_database", "receiver_command"]


def _redacted(text: str, location: str) -> str:
    """``text`` without the password or token values of the inbox ``location`` (a DSN)."""
    for secret in sorted(url_credentials(location), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


async def _open_and_close(settings: ReceiverSettings) -> None:
    from receiver.inbox.factory import open_inbox

    inbox = await open_inbox(settings.db, lease=settings.lease)
    await inbox.close()


def check_database(settings: ReceiverSettings) -> None:
    """Open and close the inbox once; any failure is one :class:`ConfigurationError` line."""
    try:
        asyncio.run(_open_and_close(settings))
    except ReceiverError:
        raise
    except Exception as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigurationError(
            f"cannot open the inbox at {shown_url(settings.db)}: {_redacted(reason, settings.db)}"
        ) from None


@click.command("receiver")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="0: any."
)
@secret_option()
@db_option(
    default=DEFAULT_DB,
    metavar="LOCATION",
    help="Inbox: a SQLite file path, postgresql://… or :memory:.",
)
@click.option("--path", default="/webhooks", show_default=True, help="Webhook path to guard.")
@click.option(
    "--probe-token",
    envvar="HOOKPROOF_PROBE_TOKEN",
    default=None,
    help="Enable the probe with this bearer token (env: HOOKPROOF_PROBE_TOKEN).",
)
@click.option(
    "--probe-prefix",
    default=DEFAULT_PROBE_PREFIX,
    show_default=True,
    help="Path prefix of the probe: GET {prefix}/{event_id}.",
)
@click.option(
    "--tolerance",
    type=click.IntRange(min=0),
    default=DEFAULT_TOLERANCE_S,
    show_default=True,
    help="Accepted timestamp skew, seconds, both directions.",
)
@scheme_option(help="The signing scheme the sender uses.")
@click.option(
    "--max-body",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_BODY,
    show_default=True,
    help="Largest accepted body, bytes (larger: 413).",
)
@click.option(
    "--lease",
    type=click.IntRange(min=1),
    default=30,
    show_default=True,
    help="Seconds a claim is held before another copy may take it over.",
)
@click.option(
    "--transactional/--no-transactional",
    default=True,
    show_default=True,
    help="Write the demo effect inside the inbox transaction (exactly-once).",
)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
    help="How much the server logs.",
)
def receiver_command(
    host: str,
    port: int,
    secrets: tuple[str, ...],
    db: str,
    path: str,
    probe_token: str | None,
    probe_prefix: str,
    tolerance: int,
    scheme: str,
    max_body: int,
    lease: int,
    transactional: bool,
    log_level: str,
) -> None:
    """Serve the reference receiver: verify, deduplicate durably, record a demo effect."""
    settings = ReceiverSettings(
        secrets=required_secrets(secrets),
        db=db,
        path=path,
        probe_token=probe_token,
        probe_prefix=probe_prefix,
        tolerance=tolerance,
        scheme=scheme,
        max_body=max_body,
        lease=timedelta(seconds=lease),
        transactional=transactional,
    )
    build_verifier(settings)
    check_database(settings)
    sock = bind_socket(host, port)
    bound = sock.getsockname()[1]
    probe = f", probe {probe_prefix}/<event_id>" if probe_token else ""
    make_console(stderr=True).print(
        f"hookproof receiver listening on {base_url(host, bound)}{path} "
        f"(scheme {scheme}, inbox {shown_url(db)}{probe})"
    )
    serve(create_app(settings), sock, log_level=log_level)
