"""The writer thread: one connection, jobs in order, queued appends committed as one group."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import StaticPool

from ...errors import StoreError
from .. import plans
from ..engine import SQLiteOptions, StoreURL
from ..idle_index import INDEX_BACKLOG, INDEX_EVERY, INDEX_IDLE
from ..indexer import catch_up, catch_up_all
from ..queries import AppendStatements
from ..schema import Tables
from . import transactions
from .driver import (
    BEGIN_WRITE,
    begin_write,
    connect_sqlite,
    own_lock_waits,
)
from .handoff import CLOSED, NO_JOB, AppendJob, CallJob, hand_back, hand_back_one
from .readers import close_readers

T = TypeVar("T")

WRITE_OPTION = "todo_sessions_write"


class Writer:
    """The writer thread: runs jobs in order, committing queued appends as one group."""

    def __init__(self, target: StoreURL, options: SQLiteOptions, sql: AppendStatements) -> None:
        self._target = target
        self._options = options
        self._sql = sql
        self.patience = options.busy_timeout_ms / 1000
        """How long `begin_write` waits for another process's write lock (seconds)."""
        self.own_waits = own_lock_waits(target, options)
        self.relaxed_index = self.own_waits and options.synchronous == "FULL"
        """Whether the index's catch-up transactions commit with ``synchronous=NORMAL``
        (`index_transaction`): a file in WAL mode whose appends commit with FULL."""
        self._jobs: queue.SimpleQueue[AppendJob | CallJob | None] = queue.SimpleQueue()
        self.conn: sqlite3.Connection | None = None
        self.closed = False
        """Set on the thread by `close_writer`: no connection is opened again after it."""
        self._engine: Engine | None = None
        self.index_tables: Tables | None = None
        """The tables the idle catch-up indexes (`_index_while_idle`); None: it never runs."""
        self.unindexed = 0
        """Events this writer committed since its last catch-up (an estimate: others may
        have indexed them)."""
        self._indexed_at = 0.0
        """``time.monotonic()`` when the last idle catch-up that left nothing ended
        (`INDEX_EVERY`)."""
        self._thread = threading.Thread(target=self._serve, name="todo-sessions-writer")
        self._thread.daemon = True
        self._thread.start()

    # -- the event-loop side --------------------------------------------------------------------

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(connection, *args)`` on the writer thread, alone."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._jobs.put(CallJob(fn, args, future))
        return await future

    async def stop(self) -> None:
        """Finish the jobs already queued, close the connection, end the thread."""
        if not self.closed:
            await self.call(close_writer, self)
        self._jobs.put(None)
        # The thread has nothing left but to exit; joining it cannot block the loop for long.
        self._thread.join()
        self.fail_leftovers()

    def fail_leftovers(self) -> None:
        """Refuse the jobs queued behind the stop (an append from another event loop that
        raced the close): each gets a `StoreError` instead of waiting forever."""
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if job is not None:
                hand_back_one(job.future, None, StoreError(CLOSED))

    # -- the thread -----------------------------------------------------------------------------

    def connection(self) -> sqlite3.Connection:
        if self.conn is None:
            if self.closed:  # a job that raced the close: never reopen behind it
                raise StoreError(CLOSED)
            conn = connect_sqlite(self._target, self._options)
            if self.own_waits:
                conn.execute("PRAGMA busy_timeout = 0")  # `begin_write` waits instead
            self.conn = conn
        return self.conn

    @contextlib.contextmanager
    def configured_timeout(self) -> Iterator[sqlite3.Connection]:
        """The writer's connection with the configured busy timeout, for code other than
        this module's write transactions (migrations, the search catch-up, the integrity
        check): SQLite's own busy handler, as on every other connection."""
        conn = self.connection()
        if not self.own_waits:
            yield conn
            return
        conn.execute(f"PRAGMA busy_timeout = {int(self._options.busy_timeout_ms)}")
        try:
            yield conn
        finally:
            conn.execute("PRAGMA busy_timeout = 0")

    def engine(self) -> Engine:
        """A SQLAlchemy engine over the writer's own connection (writer thread only)."""
        if self._engine is None:
            conn = self.connection()
            engine = create_engine("sqlite://", creator=lambda: conn, poolclass=StaticPool)

            @event.listens_for(engine, "begin")
            def _begin(sa_conn: Any) -> None:
                write = sa_conn.get_execution_options().get(WRITE_OPTION, False)
                sa_conn.exec_driver_sql(BEGIN_WRITE if write else "BEGIN")

            self._engine = engine
        return self._engine

    def close_connection(self) -> None:
        engine, self._engine = self._engine, None
        conn, self.conn = self.conn, None
        if engine is not None:
            engine.dispose(close=False)
        if conn is not None:
            conn.close()

    def _serve(self) -> None:
        # A lone append is what single-append latency is made of: it is seen without an
        # exception (``empty()`` rather than ``get_nowait()`` raising ``Empty``) and committed
        # by `_commit_one`. This thread is the queue's only consumer, so ``empty()`` is exact.
        jobs = self._jobs
        get, empty = jobs.get, jobs.empty
        while True:
            job = self._next_job() if self.unindexed else get()
            if job is NO_JOB:
                continue
            if job is None:
                return
            if type(job) is CallJob:
                self._run_call(job)
                continue
            if empty():
                self._commit_one(job)  # type: ignore[arg-type]
                continue
            group: list[AppendJob] = [job]  # type: ignore[list-item]
            held: CallJob | None = None
            stop = False
            while not empty():  # everything already waiting joins this commit
                more = get()
                if type(more) is AppendJob:
                    group.append(more)
                    continue
                held, stop = more, more is None  # type: ignore[assignment]
                break
            if len(group) == 1:
                self._commit_one(group[0])
            else:
                self._commit_group(group)
            if held is not None:
                self._run_call(held)
            if stop:
                return

    def _next_job(self) -> Any:
        """The next job while the search index is behind this writer's appends: catch it up
        first when it is far behind, and once no job came for `INDEX_IDLE` seconds (then
        `NO_JOB`)."""
        if self.unindexed >= INDEX_BACKLOG:
            self._index_while_idle()
        wait = max(INDEX_IDLE, self._indexed_at + INDEX_EVERY - time.monotonic())
        try:
            return self._jobs.get(timeout=wait)
        except queue.Empty:
            self._index_while_idle()
            # more left (one transaction takes about CATCH_UP_EVENTS): the next one after
            # the idle pause alone
            self._indexed_at = 0.0 if self.unindexed else time.monotonic()
            return NO_JOB

    def _index_while_idle(self) -> None:
        """One catch-up transaction (`indexer.catch_up`) for the appends this writer left to
        the index, between jobs. A failure (the store closing, another process holding the
        write lock past the busy timeout) leaves them to the next search."""
        tables = self.index_tables
        try:
            if tables is None:
                raise StoreError("no index to catch up")
            done = self.index_transaction(lambda conn: catch_up(conn, tables))
        except Exception:
            self.unindexed = 0
            return
        if not done.more:
            self.unindexed = 0

    def index_transaction(self, fn: Callable[[Connection], T]) -> T:
        """``fn`` in a write transaction of the search index's catch-up (`indexer.catch_up`).

        With `relaxed_index`, the transaction commits with ``synchronous=NORMAL``: no fsync
        of its own. In WAL mode its frames become durable with the next FULL commit's fsync
        of the WAL (an append's, from any connection) or the next checkpoint, which syncs the
        WAL first; a crash of the machine before that loses the whole catch-up transaction,
        never part of it nor anything after it, and nothing that is not derived: the marks
        it moved come back with it and the next catch-up redoes it. The appends keep
        FULL: the setting is restored before the next job, or the connection is dropped."""
        conn = self.connection()
        if not self.relaxed_index:
            return with_sa(conn, self, fn, True)
        conn.execute("PRAGMA synchronous = NORMAL")
        try:
            return with_sa(conn, self, fn, True)
        finally:
            try:
                conn.execute("PRAGMA synchronous = FULL")
            except BaseException:
                self.close_connection()  # never an append on a NORMAL connection
                raise

    def _run_call(self, job: CallJob) -> None:
        try:
            conn = None if job.fn in _WITHOUT_CONNECTION else self.connection()
            result, error = job.fn(conn, *job.args), None
        except BaseException as exc:
            result, error = None, exc
        hand_back_one(job.future, result, error)

    def _commit_one(self, job: AppendJob) -> None:
        """A lone append: its own transaction, without a savepoint."""
        try:
            conn = self.conn or self.connection()
            begin_write(conn, self.patience)
            try:
                result = transactions.run_plan(conn, plans.append(self._sql, job.batch))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except BaseException as exc:
            hand_back_one(job.future, None, exc)
        else:
            if job.batch.index:
                self.unindexed += len(job.batch.rows)
            hand_back_one(job.future, result, None)

    def _commit_group(self, group: list[AppendJob]) -> None:
        """Appends that queued up together: one transaction, each under its own savepoint."""
        outcomes: list[Any] = [None] * len(group)
        try:
            conn = self.connection()
            begin_write(conn, self.patience)
            try:
                for i, job in enumerate(group):
                    conn.execute("SAVEPOINT todo_sessions_append")
                    try:
                        outcome = transactions.run_plan(conn, plans.append(self._sql, job.batch))
                    except Exception as exc:
                        conn.execute("ROLLBACK TO todo_sessions_append")
                        conn.execute("RELEASE todo_sessions_append")
                        outcomes[i] = (None, exc)
                    else:
                        conn.execute("RELEASE todo_sessions_append")
                        outcomes[i] = (outcome, None)
                        if job.batch.index:
                            self.unindexed += len(job.batch.rows)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except BaseException as exc:  # nothing of the group was committed
            for i, done in enumerate(outcomes):
                if done is None or done[1] is None:
                    outcomes[i] = (None, exc)
        hand_back([(job.future, *outcomes[i]) for i, job in enumerate(group)])


def close_writer(_conn: None, writer: Writer) -> None:
    writer.close_connection()
    writer.closed = True


def with_sa(
    _conn: sqlite3.Connection, writer: Writer, fn: Callable[[Connection], T], write: bool
) -> T:
    with writer.configured_timeout():
        sa_conn = writer.engine().connect()
        try:
            if write:
                sa_conn = sa_conn.execution_options(**{WRITE_OPTION: True})
            with sa_conn.begin():
                return fn(sa_conn)
        finally:
            sa_conn.close()


def catch_up_on(conn: sqlite3.Connection, writer: Writer, tables: Tables) -> int:
    """`indexer.catch_up_all` on the writer thread: every append committed before it."""

    def run(fn: Callable[[Connection], Any], write: bool) -> Any:
        return writer.index_transaction(fn) if write else with_sa(conn, writer, fn, False)

    written = catch_up_all(run, tables)
    writer.unindexed = 0
    return written


_WITHOUT_CONNECTION = frozenset({close_writer, close_readers})
"""Writer-thread calls that need no connection (closing must never open one)."""


def noop(conn: sqlite3.Connection) -> None:
    return None
