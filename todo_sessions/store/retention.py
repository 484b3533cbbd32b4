"""Retention: delete old sessions after archiving each one, and thin out checkpoints (`prune`).

The algorithm (docs/design.md, "Retention"), one session at a time:

1. select by last activity (``updated_at``): older than ``older_than``, and/or beyond the
   ``keep_last`` most recently active, with ``tag`` if given; a session with a live lease of
   another owner is skipped;
2. take the session's lease (owner `PRUNE_OWNER`), so a service cannot take it over meanwhile
   and a service's append under its older lease is refused (fencing);
3. write its JSONL export (exactly what ``todo-sessions export`` writes) gzipped to
   ``<archive>/<name>.tmp``, fsync it, rename it to ``<name>`` (`archives.archive_path`),
   fsync the directory; an archive already there (a run that crashed after writing it, or
   one named as before, `archives.legacy_archive_path`) is reused when it verifies. Files are
   0600, nothing in the directory is followed (`store.archives`);
4. verify: decompress the file and compare it line by line with a fresh export from the
   database, and check that the session's revision did not move since;
5. only then delete it through `delete` (one transaction: its events, tags, checkpoints,
   index rows and lease go together).

A crash anywhere leaves the session in the database (steps 1-4) or deleted with a verified
archive (after 5): the next run resumes, reusing the archive. Nothing else is written.
"""

from __future__ import annotations

import contextlib
import datetime
import gzip
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ..core.moments import duration_ms
from ..errors import SessionLeasedError, SessionNotFoundError, StoreError
from .archives import (
    ARCHIVE_SUFFIX,
    archive_path,
    legacy_archive_path,
    make_directory,
    open_regular,
    write_archive,
)
from .base import StoreCore
from .exporting import SessionReads
from .leasing import Leasing
from .listing import Listing
from .reading import Reading
from .records import CheckpointInfo as CheckpointRow
from .results import PruneReport, SessionSummary
from .writing import Writing

__all__ = ["ARCHIVE_SUFFIX", "PRUNE_OWNER", "Retention", "archive_path"]

PRUNE_OWNER = "todo-sessions-prune"
"""The lease owner a prune holds a session under while it archives and deletes it."""
_PRUNE_LEASE_TTL = 300.0


def _duration_ms(older_than: Any) -> int:
    try:
        return duration_ms(older_than)
    except TypeError as exc:
        raise TypeError(f"older_than {exc}") from None


class Retention:
    """`prune` of `SessionStore` (documented there): a part of it, built on its other parts
    and on what an export reads of the store (``exported``)."""

    def __init__(
        self,
        core: StoreCore,
        reading: Reading,
        writing: Writing,
        listing: Listing,
        leasing: Leasing,
        exported: SessionReads,
    ) -> None:
        self._reading, self._writing, self._listing, self._leasing = (
            reading,
            writing,
            listing,
            leasing,
        )
        self._exported = exported
        self._call, self._clock, self._check_writable = core.call, core.clock, core.check_writable

    async def _export_lines(self, session_id: str) -> AsyncIterator[str]:
        # The default export, as `todo-sessions export` writes it (its lines, control
        # characters escaped, one per line).
        from .._jsonout import escape_controls
        from .exporting import export_lines

        async for line in export_lines(self._exported, session_id):
            yield escape_controls(line) + "\n"

    async def _archive_matches(self, path: Path, session_id: str) -> bool:
        """Whether ``path`` is a regular file (`archives.open_regular`) that decompresses to
        exactly the session's export now (each line read at most one character past the one
        expected: a planted bomb is not read whole)."""
        raw = open_regular(path)
        if raw is None:
            return False
        try:
            with raw, gzip.open(raw, "rt", encoding="utf-8", newline="") as archived:
                async for line in self._export_lines(session_id):
                    if archived.readline(len(line) + 1) != line:
                        return False
                return archived.read(1) == ""
        except (OSError, EOFError, UnicodeDecodeError):  # truncated or damaged: write again
            return False

    def _archived_id(self, path: Path) -> str | None:
        """The session id in the header line of the archive at ``path`` (None: none there,
        not a regular file, or no id readable)."""
        from ..core.jsonvalue import LosslessJSONError, decode_json

        raw = open_regular(path)
        if raw is None:
            return None
        try:
            with raw, gzip.open(raw, "rt", encoding="utf-8", newline="") as archived:
                head = decode_json(archived.readline(64 * 1024))
        except (OSError, EOFError, UnicodeDecodeError, LosslessJSONError):
            return None
        inner = head.get("header") if isinstance(head, dict) else None
        found = inner.get("id") if isinstance(inner, dict) else None
        return found if isinstance(found, str) else None

    async def _write_archive(self, path: Path, session_id: str) -> None:
        other = self._archived_id(path)
        if other is not None and other != session_id:
            raise StoreError(
                f"the archive {path} holds session {other!r}, not {session_id!r}: it was not "
                f"overwritten and {session_id!r} was not deleted"
            )

        async def encoded() -> AsyncIterator[bytes]:
            async for line in self._export_lines(session_id):
                yield line.encode("utf-8")

        await write_archive(path, encoded())

    async def _selected(
        self, older_than: int | None, keep_last: int | None, tag: str | None, now: int
    ) -> list[SessionSummary]:
        chosen: list[SessionSummary] = []
        before: SessionSummary | None = None
        position = 0
        while True:
            page = await self._listing.list(limit=500, before=before, tag=tag)
            for summary in page:
                position += 1
                if keep_last is not None and position <= keep_last:
                    continue
                if older_than is not None and summary.updated_at >= now - older_than:
                    continue
                chosen.append(summary)
            if len(page) < 500:
                return chosen
            before = page[-1]

    async def prune(
        self,
        *,
        older_than: datetime.timedelta | int | None = None,
        keep_last: int | None = None,
        tag: str | None = None,
        dry_run: bool = False,
        archive: str | os.PathLike[str] | None = None,
        keep_checkpoints: int | None = None,
    ) -> PruneReport:
        if older_than is None and keep_last is None and keep_checkpoints is None:
            raise ValueError("prune needs older_than, keep_last or keep_checkpoints")
        age = None if older_than is None else _duration_ms(older_than)
        for name, count in (("keep_last", keep_last), ("keep_checkpoints", keep_checkpoints)):
            if count is not None and (type(count) is not int or count < 0):
                raise ValueError(f"{name} must be an int >= 0, got {count!r}")
        if tag is not None and not isinstance(tag, str):
            raise TypeError(f"tag must be a str, got {tag!r}")
        deleting = age is not None or keep_last is not None
        directory = None if archive is None else Path(archive)
        if deleting and directory is None:
            raise ValueError("prune deletes sessions only after archiving them: give archive=DIR")
        if not dry_run:
            self._check_writable("prune sessions")
        now = self._clock()
        selected = await self._selected(age, keep_last, tag, now) if deleting else []
        holders = await self._leasing.lease_holders(s.id for s in selected)
        leased = tuple(
            s.id
            for s in selected
            if s.id in holders and holders[s.id].live(now) and holders[s.id].owner != PRUNE_OWNER
        )
        ids = tuple(s.id for s in selected)
        kept = await self._checkpoints_to_thin(keep_checkpoints, tag, set(ids), dry_run)
        if dry_run:
            return PruneReport(ids, leased=leased, checkpoints_deleted=kept, dry_run=True)
        assert directory is not None or not selected
        archived: dict[str, str] = {}
        deleted: list[str] = []
        skipped = list(leased)
        if selected and directory is not None:
            make_directory(directory)
        for summary in selected:
            if summary.id in leased:
                continue
            assert directory is not None
            path = await self._archive_and_delete(summary.id, directory)
            if path is None:
                skipped.append(summary.id)
                continue
            archived[summary.id] = str(path)
            deleted.append(summary.id)
        return PruneReport(ids, archived, tuple(deleted), tuple(skipped), kept)

    async def _archive_and_delete(self, session_id: str, directory: Path) -> Path | None:
        """Steps 2-5 of the module docstring; None when a live owner took the session first
        (or it is gone)."""
        try:
            await self._leasing.acquire_lease(session_id, PRUNE_OWNER, ttl=_PRUNE_LEASE_TTL)
        except (SessionLeasedError, SessionNotFoundError):
            return None
        revision = await self._reading.revision(session_id)
        path = archive_path(directory, session_id)
        legacy = legacy_archive_path(directory, session_id)
        if legacy != path and await self._archive_matches(legacy, session_id):
            path = legacy  # archived under the earlier naming: reused as it is
        elif not await self._archive_matches(path, session_id):
            await self._write_archive(path, session_id)
            if not await self._archive_matches(path, session_id):
                raise StoreError(
                    f"the archive {path} of session {session_id!r} does not read back as its "
                    "export: the session was not deleted"
                )
        if await self._reading.revision(session_id) != revision:
            raise StoreError(
                f"session {session_id!r} changed while it was archived (an append without a "
                "lease): it was not deleted; run prune again"
            )
        with contextlib.suppress(SessionNotFoundError):
            await self._writing.delete(session_id)
        return path

    async def _checkpoint_rows(self, session_id: str) -> list[CheckpointRow]:
        return await self._call(
            f"reading checkpoints of session {session_id!r}",
            lambda r: r.read_checkpoints(session_id),
        )

    async def _checkpoints_to_thin(
        self, keep: int | None, tag: str | None, deleting: set[str], dry_run: bool
    ) -> int:
        """Delete (or, dry, count) the checkpoints of the kept sessions older than their
        newest ``keep``."""
        if keep is None:
            return 0
        total = 0
        before: SessionSummary | None = None
        while True:
            page = await self._listing.list(limit=500, before=before, tag=tag)
            for summary in page:
                if summary.id in deleting:
                    continue
                seqs = [c[0] for c in await self._checkpoint_rows(summary.id)]
                extra = len(seqs) - keep
                if extra <= 0:
                    continue
                total += extra
                if dry_run:
                    continue
                await self._call("pruning checkpoints", _thinning(summary.id, keep))
            if len(page) < 500:
                return total
            before = page[-1]


def _thinning(session_id: str, keep: int) -> Any:
    """The recorder call that thins ``session_id``'s checkpoints to its newest ``keep``."""
    return lambda recorder: recorder.thin_checkpoints(session_id, keep)
