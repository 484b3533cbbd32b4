"""`SQLiteRecorder`: the recorder contract over the writer thread and the reader threads (see
the package docstring)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from sqlalchemy.engine import Connection

from ...core.envelope import SessionEvent
from ...core.todos import TodoItem
from ...errors import StoreError
from .. import plans, reads
from ..batch import (
    AppendBatch,
    AppendOutcome,
)
from ..engine import SQLiteOptions, StoreURL, ensure_private_file
from ..index_ops import IndexOperations
from ..namespace import DEFAULT, Namespace
from ..planned_writes import PlannedWrites
from ..snapshots import SnapshotReads
from ..wakeups import LocalWakeups, Wait
from . import transactions
from .driver import (
    statements,
)
from .handoff import AppendJob
from .integrity import integrity_check_on
from .readers import WAIT, Readers, close_readers, read_on
from .writer import Writer, catch_up_on, noop, with_sa

T = TypeVar("T")


class SQLiteRecorder(SnapshotReads, IndexOperations, PlannedWrites):
    """The `Recorder` of an SQLite database (a file, or in memory). See the module docstring."""

    dialect = "sqlite"
    loop_bound = False

    def __init__(
        self, target: StoreURL, options: SQLiteOptions, namespace: Namespace = DEFAULT
    ) -> None:
        self._target = target
        self._options = options
        self._namespace = namespace
        self._sql = statements(namespace)  # the default namespace's: compiled once
        self._tables = namespace.table_names
        self._writer: Writer | None = None
        self._readers: Readers | None = None
        self._wakeups = LocalWakeups()

    async def open(self) -> None:
        if self._writer is not None:
            return
        path = self._target.path
        if path is not None and self._options.read_only:
            if not path.is_file():
                raise StoreError(f"cannot open {path} read-only: there is no such file")
        elif path is not None:
            ensure_private_file(path)
        writer = Writer(self._target, self._options, self._sql.append)
        try:
            await writer.call(noop)  # connect now, so a bad file fails the open
        except BaseException:
            await writer.stop()
            raise
        writer.index_tables = None if self._options.read_only else self._namespace.tables
        self._writer = writer
        if self._target.path is not None:
            self._readers = Readers(self._target, self._options, self._sql.reads, writer._thread)

    def _the_writer(self) -> Writer:
        if self._writer is None:
            raise RuntimeError("the SQLite recorder is not open")
        return self._writer

    async def append(self, batch: AppendBatch) -> AppendOutcome:
        # `Writer.append`, inlined: one coroutine less to start and resume per append.
        writer = self._writer
        if writer is None:
            raise RuntimeError("the SQLite recorder is not open")
        future: asyncio.Future[AppendOutcome] = asyncio.get_running_loop().create_future()
        writer._jobs.put(AppendJob(batch, future))
        outcome = await future
        self._wakeups.wake(batch.session_id)  # followers here need not wait for their poll
        return outcome

    async def _snapshot(self, op: Callable[..., T], *args: Any) -> T:
        if self._readers is not None:
            return await self._readers.run(op, *args)
        return await self._the_writer().call(read_on, self._sql.reads, op, args)

    async def _short(self, op: Callable[..., T], *args: Any) -> T:
        """A read of a few indexed rows: inline on the caller's thread where that never waits
        (`Readers.inline`), else on a reader thread like any other."""
        readers = self._readers
        if readers is not None:
            found = readers.inline(op, args)
            if found is not WAIT:
                return found
        return await self._snapshot(op, *args)

    async def latest_todos(self, session_id: str, upto_seq: int | None) -> list[TodoItem] | None:
        return await self._short(reads.latest_todos, session_id, upto_seq)

    async def latest_event(
        self, session_id: str, types: tuple[str, ...], upto_seq: int | None
    ) -> SessionEvent | None:
        return await self._short(reads.latest_event, session_id, types, upto_seq)

    async def _write(self, fn: Callable[..., plans.Plan[T]], *args: Any) -> T:
        writer = self._the_writer()
        return await writer.call(
            transactions.in_write_transaction, writer.patience, fn, self._sql.writes, *args
        )

    def wait_for_append(self, session_id: str) -> AbstractAsyncContextManager[Wait]:
        """SQLite has no notifications across processes: followers poll every
        ``poll_interval``, and an append through this store wakes them at once."""
        return self._wakeups.polling(session_id)

    async def check_integrity(self) -> list[str]:
        """``PRAGMA integrity_check`` (every page, index entry and constraint) and ``PRAGMA
        foreign_key_check`` (events whose session row is gone)."""
        writer = self._the_writer()
        return await writer.call(integrity_check_on, writer, self._tables)

    async def catch_up_index(self) -> int:
        writer = self._the_writer()
        return await writer.call(catch_up_on, writer, self._namespace.tables)

    async def run_locked(self, fn: Callable[[Connection], T]) -> T:
        writer = self._the_writer()
        return await writer.call(with_sa, writer, fn, True)

    async def _on_sa(self, fn: Callable[[Connection], T], *, write: bool) -> T:
        writer = self._the_writer()
        return await writer.call(with_sa, writer, fn, write)

    async def close(self) -> None:
        writer, readers = self._writer, self._readers
        self._writer = self._readers = None
        if writer is None:
            return
        if readers is not None:  # waits for running reads, on the writer thread
            await writer.call(close_readers, readers)
        await writer.stop()
