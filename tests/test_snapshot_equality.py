"""`MessageSnapshot` compares like the list it stands for (issue #17).

The consistency checks compare a live session's ``derive_messages()`` with the pure fold using
``==``; they can only fail if a snapshot is unequal to every list that differs from it.
"""

from __future__ import annotations

import operator
from typing import Any

import pytest
from logs import LogBuilder

from todo_sessions import Session
from todo_sessions.core.header import SessionHeader
from todo_sessions.core.messages import Message, UserMessage
from todo_sessions.core.surface import MessageSnapshot, SurfaceState, derive_messages
from todo_sessions.core.todos import TodoItem


def _user(text: str, id: str) -> UserMessage:
    return UserMessage.model_validate(
        {
            "id": id,
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
        }
    )


A, B, C, D = (_user(t, f"m{i}") for i, t in enumerate("abcd"))


def _snapshot(*messages: Message) -> MessageSnapshot:
    return MessageSnapshot(list(messages), len(messages))


def test_equal_to_an_equal_list_and_tuple() -> None:
    snap = _snapshot(A, B, C)
    assert snap == [A, B, C]
    assert [A, B, C] == snap  # noqa: SIM300  (the list's side: reflected __eq__)
    assert snap == (A, B, C)
    assert (snap != [A, B, C]) is False
    assert _snapshot() == []


@pytest.mark.parametrize(
    "other",
    [
        [A, B, D],  # same length, last differs
        [D, B, C],  # same length, first differs
        [C, B, A],  # same items, other order
        [A, B, C, D],  # longer
        [A, B],  # shorter (a prefix)
        [],
    ],
    ids=["last-differs", "first-differs", "reordered", "longer", "shorter", "empty"],
)
def test_unequal_to_a_different_list(other: list[Message]) -> None:
    snap = _snapshot(A, B, C)
    assert snap != other
    assert (snap == other) is False
    assert other != snap
    assert snap != tuple(other)


def test_empty_snapshot_is_unequal_to_a_non_empty_list() -> None:
    assert _snapshot() != [A]


def test_compared_with_another_snapshot() -> None:
    assert _snapshot(A, B) == _snapshot(A, B)
    assert _snapshot(A, B) != _snapshot(A, C)
    assert _snapshot(A, B) != _snapshot(A, B, C)
    assert _snapshot(A, B, C) != _snapshot(A, B)


def test_a_snapshot_is_its_length_not_the_whole_backing_list() -> None:
    backing: list[Message] = [A, B, C]
    early = MessageSnapshot(backing, 2)  # taken before C was appended
    assert early == [A, B]
    assert early != [A, B, C]
    assert early == _snapshot(A, B)
    assert list(early) == [A, B] and len(early) == 2
    assert early.to_list() == [A, B]
    assert early[-1] is B and early[0] is A
    assert early[:] == [A, B] and early[1:] == [B]
    with pytest.raises(IndexError):
        early[2]
    with pytest.raises(IndexError):
        early[-3]


@pytest.mark.parametrize("other", ["ab", b"ab", None, 3, {"a": 1}, iter([])])
def test_unequal_to_things_that_are_not_message_lists(other: Any) -> None:
    snap = _snapshot(A, B)
    assert snap != other
    assert MessageSnapshot.__eq__(snap, other) is NotImplemented


def test_strings_are_not_sequences_of_messages() -> None:
    # a str is a Sequence: without the explicit exclusion a 1-char string could compare equal
    assert MessageSnapshot.__eq__(_snapshot(), "") is NotImplemented
    assert MessageSnapshot.__eq__(_snapshot(), b"") is NotImplemented


def test_not_hashable_and_concatenates_into_lists() -> None:
    snap = _snapshot(A, B)
    with pytest.raises(TypeError, match="not hashable"):
        hash(snap)
    added, radded = operator.add(snap, [C]), operator.add([C], snap)
    assert added == [A, B, C] and isinstance(added, list)
    assert radded == [C, A, B] and isinstance(radded, list)
    assert repr(snap) == f"MessageSnapshot({[A, B]!r})"


def test_snapshots_of_a_state_are_immutable_and_compare_by_content() -> None:
    b = LogBuilder()
    b.user("a")
    b.user("b")
    state = SurfaceState()
    for event in b.events:
        state.apply(event)
    first = state.snapshot()
    b.user("c")
    state.apply(b.events[-1])
    second = state.snapshot()
    assert len(first) == 2 and len(second) == 3
    assert first != second
    assert second == derive_messages(b.events)
    assert first == derive_messages(b.events[:2])
    assert first != derive_messages(b.events)


def test_live_session_snapshot_detects_a_divergent_fold() -> None:
    b = LogBuilder()
    b.exchange("one", "c1")
    session = Session(SessionHeader(id="snap", created_at=0), b.events)
    live = session.derive_messages()
    pure = derive_messages(b.events)
    assert live == pure
    assert live != pure[:-1]
    assert live != [*pure[:-1], pure[0]]
    assert live != [*pure, pure[0]]


def test_todo_items_in_snapshots_are_unaffected() -> None:
    # guard against comparing by identity: equal models built separately compare equal
    assert _snapshot(_user("a", "m0")) == [_user("a", "m0")]
    assert TodoItem(content="x", status="pending") == TodoItem(content="x", status="pending")
