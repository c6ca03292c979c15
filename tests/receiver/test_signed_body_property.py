"""The property behind every payload rule: ANY correctly signed body is either applied exactly
once (2xx, one effect, and a duplicate changes nothing) or refused with a 4xx — never a 5xx, the
answer a sender retries until its deadline (a poison message)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from starlette.applications import Starlette

from receiver.app import ReceiverSettings, create_app
from receiver.inbox.sqlite import SqliteInbox
from tests.receiver.test_middleware_kit import NOW_S, SECRET, signed

TOKEN = "t0ken"
_IDS = itertools.count()

# JSON text with the hard parts mixed in: escapes (lone and paired surrogates), non-finite and
# huge numbers, duplicate member names, deep nesting, odd whitespace.
_SCALARS = st.sampled_from(
    [
        '"plain"',
        r'"\udfff"',
        r'"\ud800"',
        r'"\ud83d\ude00"',
        r'"\u0000\n\/"',
        '"é"',
        "NaN",
        "-Infinity",
        "1e400",
        "-0.0",
        "12345678901234567890123",
        "true",
        "null",
    ]
)
_KEYS = st.sampled_from(['"type"', '"data"', '"renewal_id"', '"id"', r'"\udc00"', '""'])


def _object(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    member = st.tuples(_KEYS, children).map(lambda kv: f"{kv[0]}:{kv[1]}")
    return st.lists(member, max_size=4).map(lambda members: "{" + ",".join(members) + "}")


def _array(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.lists(children, max_size=4).map(lambda items: "[" + " , ".join(items) + "]")


_JSONISH = st.recursive(_SCALARS, lambda c: _object(c) | _array(c), max_leaves=12)
_DOCUMENTS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=10,
)
_EVENT = st.fixed_dictionaries(
    {"type": st.sampled_from(["renewal.reminder_due", "hookproof.demo.gone", "x"])},
    optional={"data": st.dictionaries(st.sampled_from(["renewal_id", "n"]), _DOCUMENTS)},
)
_DEMO_SHAPED = st.tuples(_SCALARS, _SCALARS).map(
    lambda t: f'{{"type":{t[0]},"data":{{"renewal_id":{t[1]}}}}}'.encode()
)
BODIES = st.one_of(
    st.binary(max_size=256),
    _DEMO_SHAPED,
    _JSONISH.map(str.encode),
    _DOCUMENTS.map(lambda d: json.dumps(d).encode()),  # NaN/Infinity may appear: allow_nan
    _EVENT.map(lambda d: json.dumps(d, ensure_ascii=False).encode()),
    st.integers(1, 5000).map(lambda depth: b"[" * depth + b"]" * depth),
)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Starlette]:
    """The reference app on a SQLite inbox: the demo effect really encodes what it stores."""
    db = str(tmp_path_factory.mktemp("property") / "inbox.sqlite")
    inbox = SqliteInbox(db)
    yield create_app(
        ReceiverSettings(secrets=[SECRET.value], db=db, probe_token=TOKEN),
        clock=lambda: datetime.fromtimestamp(NOW_S, UTC),
        inbox=inbox,
    )
    asyncio.run(inbox.close())


async def _deliver_twice(
    app: Starlette, body: bytes, event_id: str
) -> tuple[int, int, dict[str, Any] | None]:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://receiver") as http:
            first = await http.post("/webhooks", content=body, headers=signed(body, event_id))
            second = await http.post("/webhooks", content=body, headers=signed(body, event_id))
            probed = await http.get(
                f"/_hookproof/events/{event_id}", headers={"authorization": f"Bearer {TOKEN}"}
            )
            document = probed.json() if probed.status_code == 200 else None
            return first.status_code, second.status_code, document


@given(BODIES)
def test_any_signed_body_is_applied_once_or_refused_with_a_4xx(app: Starlette, body: bytes) -> None:
    assume(b"hookproof.demo.unavailable" not in body)  # that demo type asks for a retry (503)
    event_id = f"evt_prop_{next(_IDS)}"
    first, second, probed = asyncio.run(_deliver_twice(app, body, event_id))
    assert first < 500, (first, body[:200])
    assert second < 500, (second, body[:200])
    if 200 <= first < 300:
        assert second == first  # the duplicate gets the stored answer ...
        assert probed is not None
        assert (probed["status"], probed["effects"]) == ("committed", 1)  # ... and no 2nd effect
    else:
        assert 400 <= first < 500, (first, body[:200])
        assert 400 <= second < 500
        assert probed is None or probed["effects"] == 0
