"""The in-memory inbox's transactions: a commit's work sees the store with its own changes on
top, the store changes only when the commit succeeds, and a commit copies only what its work
touches (a copy of the whole store per commit made ``--db :memory:`` slower with every event)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from receiver.inbox.memory import MemoryInbox, StoreTransaction


async def _commit(inbox: MemoryInbox, event_id: str, *work: Any) -> bool:
    claim = await inbox.claim(event_id)
    return await inbox.commit(event_id, claim.token, 200, work)


def test_a_failing_work_leaves_the_store_as_it_was() -> None:
    inbox = MemoryInbox()
    inbox.store.update({"rows": [{"n": 1}], "gone": 1})

    def changes_then_fails(store: Any) -> None:
        store["rows"].append({"n": 2})
        store["rows"][0]["n"] = 99
        store["new"] = True
        del store["gone"]
        raise RuntimeError("the work failed")

    with pytest.raises(RuntimeError):
        asyncio.run(_commit(inbox, "evt_1", changes_then_fails))
    assert inbox.store == {"rows": [{"n": 1}], "gone": 1}


def test_a_reader_sees_nothing_of_a_commit_until_it_succeeds() -> None:
    inbox = MemoryInbox()
    inbox.store["rows"] = []
    seen: list[Any] = []

    async def slow_work(store: Any) -> None:
        store["rows"].append("evt_1")
        store["other"] = 1
        await asyncio.sleep(0)  # another task runs here: it must see the store unchanged
        seen.append(copy.deepcopy(inbox.store))

    async def run() -> None:
        claim = await inbox.claim("evt_1")
        assert await inbox.commit("evt_1", claim.token, 200, [slow_work])

    asyncio.run(run())
    assert seen == [{"rows": []}]
    assert inbox.store == {"rows": ["evt_1"], "other": 1}


def test_a_commit_copies_only_the_keys_its_work_touches(monkeypatch: pytest.MonkeyPatch) -> None:
    inbox = MemoryInbox()
    inbox.store.update({f"event/{n}": [n] for n in range(1000)})
    copied: list[Any] = []
    real_deepcopy = copy.deepcopy

    def counting(value: Any, *args: Any) -> Any:
        copied.append(value)
        return real_deepcopy(value, *args)

    monkeypatch.setattr("receiver.inbox.memory.copy.deepcopy", counting)

    def append(store: Any) -> None:
        store.setdefault("event/7", []).append("again")
        store.setdefault("event/new", []).append("first")

    assert asyncio.run(_commit(inbox, "evt_1", append))
    assert copied == [[7]]  # one key's value, not the thousand-key store
    assert inbox.store["event/7"] == [7, "again"]
    assert inbox.store["event/new"] == ["first"]
    assert len(inbox.store) == 1001


_KEYS = st.sampled_from(["a", "b", "c", "d"])
_OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), _KEYS, st.integers()),
        st.tuples(st.just("append"), _KEYS, st.integers()),
        st.tuples(st.just("delete"), _KEYS, st.none()),
        st.tuples(st.just("pop"), _KEYS, st.none()),
    ),
    max_size=12,
)


def _apply(mapping: Any, operations: list[tuple[str, str, Any]]) -> list[Any]:
    """Run ``operations`` on ``mapping``; what each one returned (or the error it raised)."""
    outcomes: list[Any] = []
    for name, key, value in operations:
        try:
            if name == "set":
                mapping[key] = [value]
            elif name == "append":
                mapping.setdefault(key, []).append(value)
            elif name == "delete":
                del mapping[key]
            else:
                outcomes.append(mapping.pop(key, "absent"))
                continue
            outcomes.append(None)
        except KeyError:
            outcomes.append("KeyError")
    return outcomes


@given(
    st.dictionaries(_KEYS, st.lists(st.integers(), max_size=3), max_size=4),
    _OPERATIONS,
)
def test_a_transaction_behaves_as_a_dict_and_applies_as_one(
    start: dict[str, list[int]], operations: list[tuple[str, str, Any]]
) -> None:
    plain = copy.deepcopy(start)
    expected = _apply(plain, operations)
    store = copy.deepcopy(start)
    transaction = StoreTransaction(store)
    assert _apply(transaction, operations) == expected
    assert dict(transaction) == plain
    assert sorted(transaction) == sorted(plain)
    assert len(transaction) == len(plain)
    assert store == start  # nothing written before apply
    transaction.apply()
    assert store == plain
