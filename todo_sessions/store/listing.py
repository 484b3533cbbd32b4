"""Listing sessions, their ids and metadata; the database's own integrity check (a part of
`SessionStore`)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable, Mapping
from types import EllipsisType
from typing import Any, Literal

from ..core.envelope import SessionEvent
from ..core.header import check_session_id
from ..core.meta import META_TYPE
from .base import StoreCore
from .leases import Lease
from .reading import Reading
from .reads import ListFilters
from .results import SessionSummary
from .retry import retry_on_conflict
from .translate import translate_errors
from .writing import Writing

__all__ = ["Listing", "check_filters"]


def check_filters(since: int | None, until: int | None, **texts: str | None) -> None:
    """The filters `list` and `search` share: epoch ms ints, strings without NUL."""
    for name, ms in (("since", since), ("until", until)):
        if ms is not None and type(ms) is not int:
            raise TypeError(f"{name} must be an int (epoch ms), got {ms!r}")
    for name, value in texts.items():
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a str, got {value!r}")
        if value is not None and "\x00" in value:
            raise ValueError(f"{name} must not contain NUL characters")


class Listing:
    """`list`, `session_ids`, `seqs_past_end`, `update_meta` and `check_database` of
    `SessionStore` (documented there)."""

    def __init__(self, core: StoreCore, reading: Reading, writing: Writing) -> None:
        self._reading, self._writing = reading, writing
        # the core's members the listing uses
        self._ready, self._call, self._clock, self._summary = (
            core.ready,
            core.call,
            core.clock,
            core.summary,
        )

    async def check_database(self) -> list[str]:
        recorder = await self._ready()
        with translate_errors("checking the database"):
            return await recorder.check_integrity()

    async def session_ids(
        self, *, source: Literal["sessions", "events"] = "sessions", page_size: int = 1000
    ) -> AsyncGenerator[str, None]:
        after = ""
        while True:
            page = await self._session_ids_page(source, after, page_size)
            for session_id in page:
                yield session_id
            if len(page) < page_size:
                return
            after = page[-1]

    async def _session_ids_page(
        self, source: Literal["sessions", "events"], after: str, page_size: int
    ) -> list[str]:
        return await self._call(
            "listing session ids", lambda r: r.session_ids(source, after, page_size)
        )

    async def seqs_past_end(self, session_id: str, *, limit: int = 100) -> list[int]:
        check_session_id(session_id)
        return await self._call(
            f"reading session {session_id!r}", lambda r: r.seqs_past_end(session_id, limit)
        )

    async def update_meta(
        self,
        session_id: str,
        *,
        title: str | EllipsisType | None = ...,
        tags: Iterable[str] | None = None,
        add_tags: Iterable[str] = (),
        remove_tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        lease: Lease | None = None,
    ) -> SessionSummary:
        check_session_id(session_id)
        new_tags = None if tags is None else list(tags)
        adding, removing = list(add_tags), set(remove_tags)

        async def attempt() -> SessionSummary:
            current = await self._reading.summary(session_id)
            data: dict[str, Any] = {}
            if title is not ... and title != current.title:
                data["title"] = title
            wanted = list(current.tags) if new_tags is None else list(new_tags)
            wanted += [t for t in dict.fromkeys(adding) if t not in wanted]
            wanted = [t for t in wanted if t not in removing]
            if tuple(wanted) != current.tags:
                data["tags"] = wanted
            if metadata is not None and dict(metadata) != dict(current.metadata):
                data["metadata"] = dict(metadata)
            if not data:
                return current
            # ignorable: a reader without the type (an older version, the TypeScript
            # harness) keeps and skips it; the log means the same to the model either way
            event = SessionEvent(META_TYPE, current.next_seq, self._clock(), data, ignorable=True)
            await self._writing.append(session_id, [event], lease=lease)
            return await self._reading.summary(session_id)

        return await retry_on_conflict(session_id, "update_meta", attempt)

    async def list(
        self,
        *,
        limit: int = 100,
        before: SessionSummary | None = None,
        cwd: str | None = None,
        tag: str | None = None,
        since: int | None = None,
        until: int | None = None,
        parent: str | None = None,
        has_open_todos: bool | None = None,
        text: str | None = None,
    ) -> list[SessionSummary]:
        if type(limit) is not int or limit < 1:
            raise ValueError(f"limit must be a positive int, got {limit!r}")
        check_filters(since, until, cwd=cwd, tag=tag, parent=parent, text=text)
        if has_open_todos is not None and not isinstance(has_open_todos, bool):
            raise TypeError(f"has_open_todos must be a bool, got {has_open_todos!r}")
        filters = ListFilters(cwd, tag, since, until, parent, has_open_todos, text)
        after = None if before is None else (before.updated_at, before.id)
        rows = await self._call(
            "listing sessions", lambda r: r.list_sessions(limit, after, filters)
        )
        return [self._summary(r) for r in rows]
