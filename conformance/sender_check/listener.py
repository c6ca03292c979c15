"""The scripted listener: a small HTTP/1.1 server on a real socket, one session per scenario URL.

Every request to ``/s/{run_id}/{scenario_id}`` is an *attempt*: its arrival (monotonic and wall
time), headers, exact body bytes, the event id and timestamp it carries (read where the scheme
keeps them, whether or not the signature verifies) and the scheme's verdict on its signature are
recorded, then it is answered from the session's script — a status (with ``Retry-After`` in
seconds or as an HTTP date, or with a ``Location``), a response held until the sender hangs up
(or, bounded, answered 503), or a reset (RST). Each connection carries one attempt and is closed
after it (``Connection: close``), so when an attempt *ended* (answered, reset, or the sender hung
up) is known. A redirect's ``Location`` is ``/s/{run_id}/{scenario_id}/{name}``: a request there
is no attempt but a *followed* redirect, recorded the same way and answered 200. Anything else is
answered 404 and recorded nowhere. The clocks are ``loop.time()`` for gaps and ``time.time()``
for comparing with signed timestamps.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
import struct
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus

from conformance.sender_check.script import Answer, Kind
from receiver.exceptions import VerificationError
from receiver.server import base_url
from receiver.signing import Scheme, VerifiedMessage, Verifier

__all__ = ["Attempt", "Listener", "Session"]

_MAX_HEAD = 64 * 1024
_MAX_BODY = 8 * 1024 * 1024
_READ_TIMEOUT_S = 30.0


def _unusual_spelling(scheme: Scheme, headers: dict[str, str]) -> str:
    """Why a signature that verifies would still be refused by the scheme's documented
    receivers (``""``: it would not): hex in upper case, which Stripe's libraries and GitHub's
    documented check compare as the lower-case text they compute."""
    if scheme.case_sensitive_signatures:  # base64: its case is part of its bytes
        return ""
    if any(value != value.lower() for value in scheme.signature_values(headers)):
        return (
            "its hex signature is upper case: the scheme's documented receivers compare the "
            "lower-case text they compute (Stripe's libraries, GitHub's sample), and refuse it"
        )
    return ""


@dataclass
class Attempt:
    """One request of the sender, as received and as answered."""

    number: int
    arrived: float
    arrived_wall: float
    headers: dict[str, str]
    body: bytes
    answer: Answer
    message: VerifiedMessage | None = None
    verify_error: str = ""
    event_id: str = ""
    """The event id where the scheme carries it, read without verifying (``""``: none)."""
    timestamp: int | None = None
    """The timestamp where the scheme carries it, read without verifying (``None``: none, or not
    integer seconds)."""
    retry_after_s: float | None = None
    """The delay the announced ``Retry-After`` asked for, from when the answer was sent."""
    ended: float | None = None
    hung_up: bool = False
    """The sender closed the connection before any answer (a held attempt it gave up on)."""
    followed: str = ""
    """Set on a request to a redirect's ``Location`` (not an attempt): the path it went to;
    ``number`` is then the attempt whose redirect it followed."""
    open_held: tuple[int, ...] = ()
    """Earlier held attempts whose connection was still open, unanswered and not closed by the
    sender, when this one arrived: the sender had them in flight (a causal fact, no timing)."""

    @property
    def held_s(self) -> float:
        """How long the attempt stayed open after it arrived (0 while unknown)."""
        return 0.0 if self.ended is None else max(0.0, self.ended - self.arrived)


@dataclass
class Session:
    """One scenario's URL: its script, its attempts, and an event set at every change."""

    scenario_id: str
    script: tuple[Answer, ...]
    verifier: Verifier
    hold_s: float
    retry_after_s: int
    attempts: list[Attempt] = field(default_factory=list)
    followed: list[Attempt] = field(default_factory=list)
    """Requests to the ``Location`` of a redirect this session answered."""
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    holding: dict[int, asyncio.StreamReader] = field(default_factory=dict)
    """The readers of the attempts held right now, by number."""

    def next_answer(self) -> Answer:
        return self.script[min(len(self.attempts), len(self.script) - 1)]

    @property
    def in_flight(self) -> bool:
        return any(a.ended is None for a in (*self.attempts, *self.followed))

    @property
    def locations(self) -> frozenset[str]:
        """The names of the redirect targets the script announces."""
        return frozenset(a.location for a in self.script if a.location)


class Listener:
    """Serves every open session on ``host:port`` until :meth:`close`."""

    def __init__(self, public_url: str | None = None) -> None:
        self.run_id = secrets.token_hex(4)
        self._public_url = public_url.rstrip("/") if public_url else None
        self._sessions: dict[str, Session] = {}
        self._server: asyncio.Server | None = None
        self._bound = ""

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._serve, host, port, limit=_MAX_HEAD)
        address = self._server.sockets[0].getsockname()
        self._bound = base_url(address[0], address[1])

    @property
    def base_url(self) -> str:
        return self._public_url or self._bound

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    def path_of(self, scenario_id: str) -> str:
        return f"/s/{self.run_id}/{scenario_id}"

    def open(self, session: Session) -> str:
        """Start answering ``session``'s URL; returns it."""
        self._sessions[self.path_of(session.scenario_id)] = session
        return self.base_url + self.path_of(session.scenario_id)

    def forget(self, session: Session) -> None:
        self._sessions.pop(self.path_of(session.scenario_id), None)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(_read_request(reader), _READ_TIMEOUT_S)
            if request is None:
                return
            path, headers, body = request
            path = path.split("?", 1)[0]
            session = self._sessions.get(path)
            if session is not None:
                await self._attempt(session, headers, body, reader, writer)
                return
            owner_path, _, name = path.rpartition("/")
            owner = self._sessions.get(owner_path)
            if owner is not None and name in owner.locations:
                await self._followed(owner, path, headers, body, writer)
                return
            await _respond(writer, 404)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    def _record(
        self, session: Session, number: int, headers: dict[str, str], body: bytes, answer: Answer
    ) -> Attempt:
        """A request as it arrived: the id and timestamp where the scheme carries them, and the
        scheme's verdict on its signature."""
        scheme = session.verifier.scheme
        request = Attempt(
            number,
            asyncio.get_running_loop().time(),
            time.time(),
            headers,
            body,
            answer,
            event_id=scheme.event_id(headers, body),
            timestamp=scheme.timestamp_of(headers),
        )
        try:
            request.message = session.verifier.verify(body, headers, now=request.arrived_wall)
        except VerificationError as error:
            request.verify_error = str(error) or error.__class__.__name__
        else:
            spelled = _unusual_spelling(scheme, headers)
            if spelled:  # it verifies here, leniently; the documented receivers refuse it
                request.message, request.verify_error = None, spelled
        return request

    async def _followed(
        self,
        session: Session,
        path: str,
        headers: dict[str, str],
        body: bytes,
        writer: asyncio.StreamWriter,
    ) -> None:
        """A request to a redirect's Location: recorded, answered 200."""
        redirected = [a for a in session.attempts if a.answer.location]
        number = redirected[-1].number if redirected else 0
        request = self._record(session, number, headers, body, Answer(Kind.STATUS, 200))
        request.followed = path
        session.followed.append(request)
        session.changed.set()
        try:
            await _respond(writer, 200)
        finally:
            request.ended = asyncio.get_running_loop().time()
            session.changed.set()

    async def _attempt(
        self,
        session: Session,
        headers: dict[str, str],
        body: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        loop = asyncio.get_running_loop()
        answer = session.next_answer()
        attempt = self._record(session, len(session.attempts) + 1, headers, body, answer)
        # Whatever the sender closed before this request came is already read as closed: the
        # loop sees its end of file no later than this request's bytes.
        attempt.open_held = tuple(
            number
            for number, held in session.holding.items()
            if not held.at_eof() and held.exception() is None
        )
        session.attempts.append(attempt)
        session.changed.set()
        try:
            if answer.kind is Kind.RESET:
                _reset(writer)
            elif answer.kind is Kind.HOLD:
                session.holding[attempt.number] = reader
                try:
                    attempt.hung_up = await _hung_up_within(reader, session.hold_s)
                finally:
                    del session.holding[attempt.number]
                if not attempt.hung_up:
                    await _respond(writer, 503)
            else:
                extra = {}
                if answer.retry_after == "seconds":
                    extra["Retry-After"] = str(session.retry_after_s)
                    attempt.retry_after_s = float(session.retry_after_s)
                elif answer.retry_after == "date":
                    at = int(time.time()) + session.retry_after_s + 1
                    extra["Retry-After"] = formatdate(at, usegmt=True)
                    attempt.retry_after_s = at - time.time()
                if answer.location:
                    extra["Location"] = (
                        f"{self.base_url}{self.path_of(session.scenario_id)}/{answer.location}"
                    )
                await _respond(writer, answer.status, extra)
        finally:
            attempt.ended = loop.time()
            session.changed.set()


async def _read_request(
    reader: asyncio.StreamReader,
) -> tuple[str, dict[str, str], bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise ValueError("bad request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    else:
        length = int(headers.get("content-length", "0") or "0")
        if not 0 <= length <= _MAX_BODY:
            raise ValueError("body too large")
        body = await reader.readexactly(length)
    return parts[1], headers, body


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks = bytearray()
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass
            return bytes(chunks)
        chunks += await reader.readexactly(size)
        await reader.readexactly(2)
        if len(chunks) > _MAX_BODY:
            raise ValueError("body too large")


async def _respond(
    writer: asyncio.StreamWriter, status: int, extra: dict[str, str] | None = None
) -> None:
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Status"
    body = b"" if status in (204, 304) or status < 200 else reason.encode()
    lines = [f"HTTP/1.1 {status} {reason}", "Connection: close"]
    if body or status not in (204, 304):
        lines.append(f"Content-Length: {len(body)}")
    lines += [f"{name}: {value}" for name, value in (extra or {}).items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
    await writer.drain()


async def _hung_up_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    """Whether the peer closes the connection within ``seconds`` (stray bytes are ignored)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while (left := deadline - loop.time()) > 0:
        try:
            data = await asyncio.wait_for(reader.read(4096), left)
        except TimeoutError:
            return False
        except ConnectionError:
            return True
        if not data:
            return True
    return False


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST: linger on, timeout zero, then abort."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
