"""Reading a session: its events, header, revision, summary, counts and projections (a part of
`SessionStore`)."""

from __future__ import annotations

from collections.abc import Mapping

from ..core.chain import event_text, genesis, link
from ..core.envelope import SessionEvent
from ..core.header import SessionHeader, check_session_id
from ..core.messages import Message
from ..core.meta import add_usage
from ..core.todos import TodoItem
from ..errors import SessionNotFoundError
from .base import StoreCore
from .codec import header_from_row
from .keying import unkeyed_link, unkeyed_report
from .reads import check_from_seq
from .records import EventsRead, SessionRow
from .results import SessionSummary, SessionUsage, StoredLog

__all__ = ["Reading"]


def _check_upto(upto_seq: int | None) -> None:
    if upto_seq is not None and (type(upto_seq) is not int or upto_seq < 0):
        raise ValueError(f"upto_seq must be a non-negative int, got {upto_seq!r}")


class Reading:
    """The read operations of `SessionStore` (documented there)."""

    def __init__(self, core: StoreCore) -> None:
        # the core's members these reads use
        self._call, self._token, self._pending = core.call, core.token, core.pending
        self._chain_key, self.page_size = core.chain_key, core.page_size
        self._summary, self._skipped = core.summary, core.skipped

    async def read_events(
        self, session_id: str, from_seq: int, limit: int | None = None
    ) -> EventsRead:
        """The session's row and its events from ``from_seq`` (at most ``limit``), in one read
        transaction: what `read`, `read_from` and the streams read."""
        check_session_id(session_id)
        return await self._call(
            f"reading session {session_id!r}",
            lambda r: r.read_events(session_id, from_seq, limit),
        )

    async def read_from(
        self, session_id: str, from_seq: int = 0, *, limit: int | None = None
    ) -> list[SessionEvent]:
        check_from_seq(from_seq)
        if limit is not None and (type(limit) is not int or limit < 0):
            raise ValueError(f"limit must be a non-negative int, got {limit!r}")
        return (await self.read_events(session_id, from_seq, limit))[1]

    async def read(self, session_id: str) -> StoredLog:
        row, events = await self.read_events(session_id, 0)
        return StoredLog(
            header_from_row(row), tuple(events), self._token(row.incarnation, row.revision)
        )

    async def head(self, session_id: str) -> str | None:
        found = await self.chain_head(session_id)
        return None if found is None else found[1]

    async def chain_head(self, session_id: str) -> tuple[int, str | None] | None:
        check_session_id(session_id)
        try:
            return await self._call(
                f"reading session {session_id!r}", lambda r: r.chain_head(session_id)
            )
        except SessionNotFoundError:
            if session_id in self._pending:
                return None
            raise

    async def chain_break(
        self, session_id: str, *, against: Mapping[int, str] | None = None
    ) -> tuple[int, str] | None:
        check_session_id(session_id)
        key, size = self._chain_key, self.page_size
        value: bytes | None = None
        seq = 0
        unkeyed: list[int] = []  # links made without the key (`keying.unkeyed_link`)
        while True:
            row, page = await self._call(
                f"reading session {session_id!r}",
                lambda r, start=seq: r.read_chain(session_id, start, size),  # type: ignore[misc]
            )
            if value is None:
                value = genesis(row._asdict(), key)
            for stored in page:
                if stored.seq != seq:
                    return seq, f"seq {seq} is missing"
                previous, value = value, link(value, event_text(stored._asdict()), key)
                kept = stored.chain
                if kept is None:
                    return seq, "the event has no chain value (written outside todo_sessions)"
                if kept != value.hex() and key and unkeyed_link(seq and previous, row, stored):
                    unkeyed.append(seq)  # told apart, and the chain goes on from it
                    value = bytes.fromhex(kept)
                elif kept != value.hex():
                    return seq, (
                        "the chain breaks here: this event (at seq 0: or the header) was "
                        "changed, moved or inserted outside todo_sessions, or the log was "
                        "chained with another key (or none)"
                    )
                if against and against.get(seq, kept) != kept:
                    return seq, (
                        "the chain differs from the one kept elsewhere (the log was "
                        "rewritten at or before this seq)"
                    )
                seq += 1
            if len(page) < size or seq >= row.next_seq:
                break
        if against and max(against) >= seq:
            return seq, (
                f"the log ends before seq {seq}, but a chain value of seq {max(against)} was "
                "kept elsewhere: its tail was cut off"
            )
        return unkeyed_report(unkeyed) if unkeyed else None

    async def _session(self, session_id: str) -> SessionRow:
        check_session_id(session_id)
        return await self._call(
            f"reading session {session_id!r}", lambda r: r.read_session(session_id)
        )

    async def header(self, session_id: str) -> SessionHeader:
        return header_from_row(await self._session(session_id))

    async def revision(self, session_id: str) -> str:
        row = await self._session(session_id)
        return self._token(row.incarnation, row.revision)

    async def summary(self, session_id: str) -> SessionSummary:
        check_session_id(session_id)
        return self._summary(
            await self._call(
                f"reading session {session_id!r}", lambda r: r.read_summary(session_id)
            )
        )

    async def count(self, session_id: str, *, type: str | None = None) -> int:
        check_session_id(session_id)
        event_type = type
        return await self._call(
            f"counting events of session {session_id!r}",
            lambda r: r.count_events(session_id, event_type),
        )

    async def current_todos(
        self, session_id: str, *, upto_seq: int | None = None
    ) -> list[TodoItem] | None:
        _check_upto(upto_seq)
        check_session_id(session_id)
        return await self._call(
            f"reading todos of session {session_id!r}",
            lambda r: r.latest_todos(session_id, upto_seq),
        )

    async def latest_event(
        self, session_id: str, *types: str, upto_seq: int | None = None
    ) -> SessionEvent | None:
        _check_upto(upto_seq)
        check_session_id(session_id)
        if not types or any(type(t) is not str for t in types):
            raise ValueError(f"latest_event needs one or more event types (str), got {types!r}")
        return await self._call(
            f"reading the latest {'/'.join(types)} of session {session_id!r}",
            lambda r: r.latest_event(session_id, types, upto_seq),
        )

    async def derive_messages(
        self, session_id: str, *, upto_seq: int | None = None
    ) -> list[Message]:
        _check_upto(upto_seq)
        check_session_id(session_id)
        found = await self._call(
            f"reading messages of session {session_id!r}",
            lambda r: r.read_surface_state(session_id, upto_seq),
        )
        self._skipped(session_id, found.skipped)
        return found.state.surface.messages()

    async def usage(self, session_id: str) -> SessionUsage:
        check_session_id(session_id)
        found = await self._call(
            f"reading usage of session {session_id!r}", lambda r: r.usage_payloads(session_id)
        )
        total: dict[str, int | float] = {}
        turns: dict[int, dict[str, int | float]] = {}
        counted = 0
        for _seq, data in found:
            usage = data.get("usage") if isinstance(data, dict) else None
            if not isinstance(usage, dict):
                continue
            counted += 1
            add_usage(total, usage)
            turn = data.get("turn")
            if type(turn) is int:
                add_usage(turns.setdefault(turn, {}), usage)
        return SessionUsage(total, turns, counted)
