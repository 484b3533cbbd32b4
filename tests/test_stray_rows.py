"""Rows written behind the store's back, past a session's stored end."""

from __future__ import annotations

import pytest
from factories import header, raw_sql, turn
from sqlalchemy import text
from sqlalchemy.engine import Connection

from todo_sessions import CorruptSessionError, SessionStore


async def test_a_row_past_the_stored_end_makes_appends_a_corruption_error(
    store: SessionStore,
) -> None:
    await store.create(header("s"))
    token = await store.append("s", turn(0))

    def stray(conn: Connection) -> None:
        conn.execute(
            text(
                "INSERT INTO session_events (session_id, seq, type, time, data, ignorable) "
                "VALUES ('s', 7, 'request/context', 0, '{}', false)"
            )
        )

    await raw_sql(store, stray)
    await store.append("s", turn(6, 2)[:1])  # seq 6 is still free
    with pytest.raises(CorruptSessionError) as caught:
        await store.append("s", turn(6, 2)[1:])  # seq 7 is taken by the stray row
    assert caught.value.session_id == "s"
    assert caught.value.seq == 7
    assert "past the session's stored end" in str(caught.value)
    assert "concurrent" not in str(caught.value)
    assert len(await store.read_from("s")) == 7  # the failed append wrote nothing
    assert await store.revision("s") != token
