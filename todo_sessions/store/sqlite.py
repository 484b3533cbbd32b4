"""The SQLite recorder: one writer thread with group commit, a few reader threads.

One data-access stack serves everything: plain ``sqlite3`` connections, each owned by one
thread of the store.

- **The writer thread** owns the write connection. Appends, deletes, migrations and
  maintenance run there, in the order they were asked for. Appends that queue up while the
  writer is busy (typically: while it waits for the previous fsync) are committed together:
  one ``BEGIN IMMEDIATE``, each append under its own ``SAVEPOINT`` with its own seq check, one
  ``COMMIT`` and so one fsync for all of them. An append that fails is rolled back to its
  savepoint alone; its neighbours commit. Nothing is acknowledged before the shared COMMIT has
  returned. A lone append runs without a savepoint and without waiting for company.
- **The search index** is not written by the appends (docs/design.md, "The deferred
  index"): each marks its events pending, and the writer thread catches the index up once it
  has had no job for `INDEX_IDLE`, or between jobs past `INDEX_BACKLOG` events
  (`_Writer._next_job`); a search catches up whatever is left first (`catch_up_index`).
- **Reader threads** (two) each own a read connection; a read operation runs as one function
  inside one read transaction (a consistent WAL snapshot). An in-memory database has a single
  connection, so there the writer thread serves reads too (no reader threads).
- Every write (appends, deletes, leases, checkpoints) runs compiled statements on that
  connection, inside ``BEGIN IMMEDIATE`` (`_write`, the one write transaction of this module;
  the group commit adds savepoints): one write stack. The statements are compiled once per
  namespace from the SQLAlchemy Core definitions (`namespace.Namespace.compiled`).
- Migrations (and the maintenance hatch, `run_maintenance`) get a SQLAlchemy connection
  wrapping the writer's own ``sqlite3`` connection (a ``StaticPool`` engine that exists only on
  the writer thread), so alembic and the Core table definitions stay the single source of
  schema and SQL.
- Its half of error translation is `classify_error` (``sqlite3`` exception classes and error
  codes).
- **Short reads run inline** (`_Readers.inline`): `latest_todos` and `latest_event` (the
  session row and one indexed row per type) run on the caller's thread, on a read connection
  of that thread, in a read transaction, where a file is in WAL mode. Why this never blocks
  the host: a WAL reader takes no lock that a writer or a checkpoint holds (it reads the
  committed pages of its snapshot from the file and the WAL), and the connection's busy
  timeout is 0, so where SQLite would wait (a WAL recovery after a crash, a connection in
  exclusive locking mode) it answers SQLITE_BUSY at once, and the read goes to a reader thread
  like any other. Nor does it run beside this process's writer: never on the writer's
  thread. What the loop pays is the read itself, a few B-tree pages already in the page
  cache: ``current_todos`` on a 100,000-event session is one statement (no BEGIN/ROLLBACK
  around it: `reads.ONE_STATEMENT`) and took a median 21-25 µs inline on a quiet machine,
  plain ``sqlite3``'s one SELECT and ``json.loads`` 6-9 µs (235 µs through a reader thread
  before any of this, at load 12-18; bench/peers_bench.py, issue #30 in bench/RESULTS.md).
  Anything longer (whole logs, folds, lists) stays on the reader threads.
  ``tests/test_inline_reads.py`` holds another process's write lock and a pending checkpoint
  while the loop reads, and watches a heartbeat.
- **Waiting for another process's write lock** (`begin_write`): in WAL mode the writer's
  connection has busy timeout 0 and its ``BEGIN IMMEDIATE`` retries after 20 µs, doubling up
  to 2 ms, until the configured busy timeout has passed. SQLite's own busy handler sleeps 1,
  2, 5, 10 ms... (``sqlite3`` cannot install another), far longer than another process's
  append holds the lock. Migrations, the maintenance hatch and the integrity check run with
  the configured busy timeout (`_Writer.configured_timeout`).

Why our own threads and not aiosqlite's connections: aiosqlite runs each *statement* as a hop
to its thread, and gives no public way to run a whole transaction (or a group of them) as one
function there. An append is at least five statements (BEGIN, state, insert, update, COMMIT)
and a grouped commit is many more. Measured with ``python bench/store_bench.py --stack``
(median of alternating rounds, 2 CPUs): single-event durable appends through aiosqlite
statement by statement ran at about 0.65x of this module's rate (the store at 1.51-1.55x of
aiosqlite). So a store opens at most three threads (``THREADS``): one writer and two readers.

Why a writer thread at all, rather than committing on the caller's event loop: a store is a
guest in its host's loop, and a commit blocks the thread that runs it. With
``synchronous=FULL`` a lone append's COMMIT took a median 160-200 µs of fsync on the
development VM (2 vCPUs), and a database locked by another process makes it wait up to the
busy timeout (5 s by default); on the loop thread, every task of the host would stall that
long. The thread is not free, and these are its measured costs (per lone durable append,
medians of 21 alternating rounds of 300, instrumented copy; bench/RESULTS.md, issue #10):
the hand-off to the writer thread (queue put, the thread's wake-up and GIL) 33-35 µs, and
the hand-back (``call_soon_threadsafe``, the loop's wake-up, the task's resumption) 54-56
µs, against 8-9 µs of the store's own Python before the hand-off. A prototype committing on
the loop thread instead reached 0.91x of plain ``sqlite3``'s rate, against 0.60-0.65x
through the thread: the difference is the two thread wake-ups, which no queue or
future primitive removes (a ``deque`` with a lock as semaphore, ``SimpleQueue`` and
``run_in_executor`` measured alike, 45-70 µs a no-op round trip). What the thread buys
besides never blocking the host: appends from concurrent tasks share one fsync (8 tasks at
2.2x the rate of commits one after another).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import operator
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import create_engine, event
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import StaticPool

from ..core.envelope import SessionEvent
from ..core.todos import TodoItem
from ..errors import SessionNotFoundError, StoreError
from . import reads, revisions
from .batch import (
    AppendBatch,
    AppendOutcome,
    after_append,
    chain_rows,
    check_batch_start,
    new_session_values,
)
from .checkpoints import CheckpointWrite
from .engine import SQLiteOptions, StoreURL, ensure_private_file, sqlite_pragmas
from .idle_index import INDEX_BACKLOG, INDEX_IDLE
from .indexer import catch_up, catch_up_all
from .leases import Lease, acquired, holder_of, renewed
from .leases import check as check_lease
from .namespace import DEFAULT, Namespace, Statements
from .queries import AppendStatements, WriteStatements
from .reads import CompiledRead
from .schema import Tables
from .snapshots import SnapshotReads
from .wakeups import LocalWakeups, Wait

__all__ = [
    "READERS",
    "THREADS",
    "SQLiteRecorder",
    "classify_error",
    "connect_sqlite",
    "is_driver_error",
    "lock_host_connection",
    "run_locked_on_engine",
]

BEGIN_WRITE = "BEGIN IMMEDIATE"
"""How every write transaction starts: the write lock up front, so two processes never
deadlock upgrading a read lock."""

_DIALECT: Any = sqlite_dialect.dialect(paramstyle="qmark")

_FIRST_WAIT = 20e-6
"""The first wait for another process's write lock (seconds): about a tenth of a durable
commit's fsync on the development VM; each wait after it doubles, up to `_LONGEST_WAIT`."""
_LONGEST_WAIT = 2e-3


def begin_write(conn: sqlite3.Connection, patience: float) -> None:
    """``BEGIN IMMEDIATE`` on a connection whose busy timeout is 0 (the writer's, in WAL
    mode): while another process holds the write lock, try again after 20 µs, 40 µs, ... up
    to 2 ms between tries, until ``patience`` seconds have passed (then SQLite's own "database
    is locked" error, as a busy timeout would give).

    SQLite's own busy handler sleeps 1, 2, 5, 10, ... ms between its tries; Python's
    ``sqlite3`` gives no way to install another one. Another process's append holds the lock
    for a fraction of a millisecond plus its fsync, so the first millisecond-long sleep
    already outlasts it (two writer processes: see bench/peers_bench.py in bench/RESULTS.md).
    """
    try:
        conn.execute(BEGIN_WRITE)
        return
    except sqlite3.OperationalError as exc:
        if classify_error(exc) != "locked":
            raise
    deadline = time.monotonic() + patience
    wait = _FIRST_WAIT
    while True:
        time.sleep(wait)
        try:
            conn.execute(BEGIN_WRITE)
            return
        except sqlite3.OperationalError as exc:
            if classify_error(exc) != "locked" or time.monotonic() >= deadline:
                raise
        wait = min(wait * 2, _LONGEST_WAIT)


def statements(namespace: Namespace) -> Statements:
    """The namespace's statements compiled for ``sqlite3`` (once per namespace)."""
    return namespace.compiled("sqlite", _DIALECT, sqlite_dialect.insert)


T = TypeVar("T")

READERS = 2
"""Reader threads of a file database."""
THREADS = 1 + READERS
"""Most threads one SQLite store ever runs: the writer and the readers."""

_WRITE_OPTION = "todo_sessions_write"


class SQLiteRows:
    """`reads.Rows` on a plain sqlite3 connection, with its namespace's compiled reads."""

    __slots__ = ("_conn", "_reads")

    def __init__(self, conn: sqlite3.Connection, reads: Mapping[str, CompiledRead]) -> None:
        self._conn = conn
        self._reads = reads

    def fetch(self, name: str, params: Mapping[str, Any]) -> list[Any]:
        read = self._reads[name]
        return self._conn.execute(read.sql, read.args(params)).fetchall()


def connect_sqlite(target: StoreURL, options: SQLiteOptions) -> sqlite3.Connection:
    """A ``sqlite3`` connection with the store's settings and no implicit transactions."""
    timeout = options.busy_timeout_ms / 1000
    if target.path is not None and options.read_only:
        uri = f"{target.path.as_uri()}?mode=ro{_immutable(target.path)}"
        conn = sqlite3.connect(
            uri, uri=True, isolation_level=None, check_same_thread=False, timeout=timeout
        )
    elif target.path is not None:
        conn = sqlite3.connect(
            target.path, isolation_level=None, check_same_thread=False, timeout=timeout
        )
    else:
        name = target.url.database
        if name and name != ":memory:":  # a named shared-cache memory database
            uri = f"file:{name}?mode=memory&cache=shared"
            conn = sqlite3.connect(
                uri, uri=True, isolation_level=None, check_same_thread=False, timeout=timeout
            )
        else:
            conn = sqlite3.connect(
                ":memory:", isolation_level=None, check_same_thread=False, timeout=timeout
            )
    try:
        for pragma in sqlite_pragmas(options, memory=target.memory):
            if pragma.startswith("PRAGMA journal_mode"):
                _set_journal_mode(conn, pragma, options.busy_timeout_ms / 1000)
            else:
                conn.execute(pragma)
    except BaseException:
        conn.close()
        raise
    return conn


def own_lock_waits(target: StoreURL, options: SQLiteOptions) -> bool:
    """Whether the writer waits for other processes' write locks itself (`begin_write`), with
    a busy timeout of 0: a file in WAL mode, where a write transaction waits for a lock only
    at its BEGIN IMMEDIATE (readers never hold one a writer needs; a rollback journal's COMMIT
    waits for readers, so there SQLite's busy timeout stays)."""
    return target.path is not None and options.journal_mode.upper() == "WAL"


def _immutable(path: Path) -> str:
    """``&immutable=1`` for a file in a directory this process may not write, with no WAL
    file beside it: SQLite cannot create the ``-shm`` file a WAL database needs even to be
    read, and nobody can change the file without creating its ``-wal`` in that directory
    first (docs/design.md, "Read-only databases")."""
    wal = path.with_name(path.name + "-wal")
    if os.access(path.parent, os.W_OK | os.X_OK) or wal.exists():
        return ""
    return "&immutable=1"


def _set_journal_mode(conn: sqlite3.Connection, pragma: str, patience: float) -> None:
    """Set the journal mode unless the file has it already. Changing it needs a lock that
    SQLite does not wait for (no busy handler): while another process holds one (opening a
    new file and migrating it), try again until the busy timeout has passed."""
    deadline = time.monotonic() + patience
    while not _already(conn, pragma):
        try:
            conn.execute(pragma)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _already(conn: sqlite3.Connection, pragma: str) -> bool:
    """Whether ``PRAGMA journal_mode = X`` would change nothing (reading it takes no lock;
    WAL, once set, is a property of the file)."""
    wanted = pragma.rsplit("=", 1)[1].strip().lower()
    current = conn.execute("PRAGMA journal_mode").fetchone()
    return current is not None and str(current[0]).lower() == wanted


# -- settling futures from a thread ---------------------------------------------------------


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the awaiting task was cancelled; the work itself still ran
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


def _settle_all(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, result, error in outcomes:
        _settle(future, result, error)


def _hand_back_one(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """Settle one future on its loop (a lone append, a call): one wake-up, no lists.

    The wake-up is the thread's last Python before it blocks on its queue again: the woken
    loop needs the GIL that this thread holds until then (hence no ``suppress`` block, whose
    ``__exit__`` would run after it)."""
    try:  # noqa: SIM105
        future.get_loop().call_soon_threadsafe(_settle, future, result, error)
    except RuntimeError:  # its loop is closed: nobody is waiting any more
        pass


def _hand_back(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    """Settle a group's futures on their loops, one wake-up per loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Any]] = {}
    for outcome in outcomes:
        by_loop.setdefault(outcome[0].get_loop(), []).append(outcome)
    for loop, items in by_loop.items():
        # A closed loop (RuntimeError) means nobody is waiting any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle_all, items)


class _AppendJob:
    __slots__ = ("batch", "future")

    def __init__(self, batch: AppendBatch, future: asyncio.Future[AppendOutcome]) -> None:
        self.batch = batch
        self.future = future


class _CallJob:
    __slots__ = ("args", "fn", "future")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], future: Any) -> None:
        self.fn = fn
        self.args = args
        self.future = future


class _Writer:
    """The writer thread: runs jobs in order, committing queued appends as one group."""

    def __init__(self, target: StoreURL, options: SQLiteOptions, sql: AppendStatements) -> None:
        self._target = target
        self._options = options
        self._sql = sql
        self.patience = options.busy_timeout_ms / 1000
        """How long `begin_write` waits for another process's write lock (seconds)."""
        self.own_waits = own_lock_waits(target, options)
        self._jobs: queue.SimpleQueue[_AppendJob | _CallJob | None] = queue.SimpleQueue()
        self.conn: sqlite3.Connection | None = None
        self.closed = False
        """Set on the thread by `_close_writer`: no connection is opened again after it."""
        self._engine: Engine | None = None
        self.index_tables: Tables | None = None
        """The tables the idle catch-up indexes (`_index_while_idle`); None: it never runs."""
        self.unindexed = 0
        """Events this writer committed since its last catch-up (an estimate: others may
        have indexed them)."""
        self._thread = threading.Thread(target=self._serve, name="todo-sessions-writer")
        self._thread.daemon = True
        self._thread.start()

    # -- the event-loop side --------------------------------------------------------------------

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(connection, *args)`` on the writer thread, alone."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._jobs.put(_CallJob(fn, args, future))
        return await future

    async def stop(self) -> None:
        """Finish the jobs already queued, close the connection, end the thread."""
        if not self.closed:
            await self.call(_close_writer, self)
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
                _hand_back_one(job.future, None, StoreError(_CLOSED))

    # -- the thread -----------------------------------------------------------------------------

    def connection(self) -> sqlite3.Connection:
        if self.conn is None:
            if self.closed:  # a job that raced the close: never reopen behind it
                raise StoreError(_CLOSED)
            conn = connect_sqlite(self._target, self._options)
            if self.own_waits:
                conn.execute("PRAGMA busy_timeout = 0")  # `begin_write` waits instead
            self.conn = conn
        return self.conn

    @contextlib.contextmanager
    def configured_timeout(self) -> Iterator[sqlite3.Connection]:
        """The writer's connection with the configured busy timeout, for code other than
        this module's write transactions (migrations, the maintenance hatch, the integrity
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
                write = sa_conn.get_execution_options().get(_WRITE_OPTION, False)
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
            if job is _NO_JOB:
                continue
            if job is None:
                return
            if type(job) is _CallJob:
                self._run_call(job)
                continue
            if empty():
                self._commit_one(job)  # type: ignore[arg-type]
                continue
            group: list[_AppendJob] = [job]  # type: ignore[list-item]
            held: _CallJob | None = None
            stop = False
            while not empty():  # everything already waiting joins this commit
                more = get()
                if type(more) is _AppendJob:
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
        `_NO_JOB`)."""
        if self.unindexed >= INDEX_BACKLOG:
            self._index_while_idle()
        try:
            return self._jobs.get(timeout=INDEX_IDLE)
        except queue.Empty:
            self._index_while_idle()
            return _NO_JOB

    def _index_while_idle(self) -> None:
        """One catch-up transaction (`indexer.catch_up`) for the appends this writer left to
        the index, between jobs. A failure (the store closing, another process holding the
        write lock past the busy timeout) leaves them to the next search."""
        tables = self.index_tables
        try:
            if tables is None:
                raise StoreError("no index to catch up")
            done = _with_sa(self.connection(), self, lambda conn: catch_up(conn, tables), True)
        except Exception:
            self.unindexed = 0
            return
        if not done.more:
            self.unindexed = 0

    def _run_call(self, job: _CallJob) -> None:
        try:
            conn = None if job.fn in _WITHOUT_CONNECTION else self.connection()
            result, error = job.fn(conn, *job.args), None
        except BaseException as exc:
            result, error = None, exc
        _hand_back_one(job.future, result, error)

    def _commit_one(self, job: _AppendJob) -> None:
        """A lone append: its own transaction, without a savepoint."""
        try:
            conn = self.conn or self.connection()
            begin_write(conn, self.patience)
            try:
                result = _append(conn, job.batch, self._sql)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except BaseException as exc:
            _hand_back_one(job.future, None, exc)
        else:
            if job.batch.index:
                self.unindexed += len(job.batch.rows)
            _hand_back_one(job.future, result, None)

    def _commit_group(self, group: list[_AppendJob]) -> None:
        """Appends that queued up together: one transaction, each under its own savepoint."""
        outcomes: list[Any] = [None] * len(group)
        try:
            conn = self.connection()
            begin_write(conn, self.patience)
            try:
                for i, job in enumerate(group):
                    conn.execute("SAVEPOINT todo_sessions_append")
                    try:
                        outcome = _append(conn, job.batch, self._sql)
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
        _hand_back([(job.future, *outcomes[i]) for i, job in enumerate(group)])


def _append(conn: sqlite3.Connection, batch: AppendBatch, _SQL: AppendStatements) -> AppendOutcome:
    """The append transaction's statements (the caller holds the write lock), compiled for
    the store's namespace."""
    session_id = batch.session_id
    if batch.lease is not None:
        leased = conn.execute(_SQL.lease.sql, (session_id,)).fetchone()
        check_lease(session_id, leased, batch.lease, batch.now)
    state = conn.execute(_SQL.state.sql, (session_id,)).fetchone()
    if state is None:
        if batch.header is None:
            raise SessionNotFoundError(session_id, "create it before the first append")
        values = new_session_values(batch.header, batch.now)
        conn.execute(_SQL.insert_session.sql, _SQL.insert_session.args(values))
        state = (0, 0, values["incarnation"], None)
    next_seq, revision, incarnation, previous = state
    rows = batch.rows
    check_batch_start(session_id, rows[0]["seq"], next_seq)
    chain_rows(batch, previous)
    conn.executemany(_SQL.insert_events.sql, map(_row_getter(_SQL.insert_events.names), rows))
    if batch.index:  # the search index takes the events after the commit (`indexer`)
        conn.execute(_SQL.mark_pending.sql, _SQL.mark_pending.args(batch.pending()))
    params = after_append(next_seq, revision, len(rows), batch.now, session_id)
    conn.execute(_SQL.update.sql, _SQL.update.args(params))
    projection = batch.projection
    if projection is not None:  # the batch has session/meta or todo/write events
        conn.execute(_SQL.projection.sql, _SQL.projection.args(projection.params))
        if projection.tags is not None:
            conn.execute(_SQL.delete_tags.sql, (session_id,))
            conn.executemany(_SQL.insert_tag.sql, [(session_id, t) for t in projection.tags])
    return incarnation, revision + 1, next_seq + len(rows)


@functools.cache
def _row_getter(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """An event row's statement parameters in one C call (``Compiled.args`` of a row, without
    a generator per row); one per namespace's column order, which the code fixes."""
    return operator.itemgetter(*names)


def _close_writer(_conn: None, writer: _Writer) -> None:
    writer.close_connection()
    writer.closed = True


_CLOSED = "the store was closed before this could run"
_NO_JOB: Any = object()
"""`_Writer._next_job`'s answer when it caught the index up instead."""


def _read_on(
    conn: sqlite3.Connection,
    reads: Mapping[str, CompiledRead],
    op: Callable[..., T],
    args: tuple[Any, ...],
) -> T:
    conn.execute("BEGIN")
    try:
        return op(SQLiteRows(conn, reads), *args)
    finally:
        conn.execute("ROLLBACK")


def _integrity_check_on(
    _conn: sqlite3.Connection, writer: _Writer, tables: Iterable[str]
) -> list[str]:
    with writer.configured_timeout() as conn:
        return _integrity_check(conn, tables)


def _integrity_check(conn: sqlite3.Connection, tables: Iterable[str]) -> list[str]:
    # A damaged file's report can quote bytes that are not UTF-8: show them, never fail on them.
    factory = conn.text_factory
    conn.text_factory = _lenient_text
    try:
        return _integrity_problems(conn, tables)
    except UnicodeDecodeError as exc:  # SQLite's own error text quotes the damaged bytes
        return [f"the integrity check stopped on damaged text ({exc.reason}): the file is damaged"]
    finally:
        conn.text_factory = factory


def _lenient_text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _integrity_problems(conn: sqlite3.Connection, tables: Iterable[str]) -> list[str]:
    """The whole file's integrity check, and the foreign keys of our ``tables`` only: a host
    application's tables in the same file (or another namespace's) are none of our business."""
    found = [str(row[0]) for row in conn.execute("PRAGMA integrity_check").fetchall()]
    problems = [] if found == ["ok"] else found
    broken: dict[tuple[str, str], int] = {}
    present = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    for name in sorted(set(tables) & present):
        for table, _rowid, parent, _fk in conn.execute(f'PRAGMA foreign_key_check("{name}")'):
            broken[(table, parent)] = broken.get((table, parent), 0) + 1
    problems += [
        f"{count} row(s) of {table} refer to a missing row of {parent}"
        for (table, parent), count in broken.items()
    ]
    return problems


def _in_write_transaction(
    conn: sqlite3.Connection, patience: float, fn: Callable[..., T], *args: Any
) -> T:
    """``fn(conn, *args)`` in one write transaction (writer thread)."""
    begin_write(conn, patience)
    try:
        result = fn(conn, *args)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result


def _delete(conn: sqlite3.Connection, sql: WriteStatements, session_id: str) -> bool:
    """Release the log, delete its events, then the session row (revision 0009's triggers
    refuse any other order)."""
    conn.execute(sql.release_log.sql, sql.release_log.args({"session_id": session_id}))
    conn.execute(sql.delete_events.sql, (session_id,))
    deleted = conn.execute(sql.delete.sql, (session_id,)).rowcount
    conn.execute(sql.delete_lease.sql, (session_id,))
    return deleted > 0


def _acquire(
    conn: sqlite3.Connection,
    sql: WriteStatements,
    session_id: str,
    owner: str,
    now: int,
    ttl_ms: int,
    steal: bool,
) -> Lease:
    current = holder_of(conn.execute(sql.lease_row.sql, (session_id,)).fetchone())
    lease, values = acquired(current, session_id, owner, now, ttl_ms, steal=steal)
    if current is None:
        conn.execute(sql.insert_lease.sql, sql.insert_lease.args(values))
    else:
        update = sql.update_lease
        conn.execute(update.sql, update.args({**values, "l_session_id": session_id}))
    return lease


def _renew(
    conn: sqlite3.Connection, sql: WriteStatements, lease: Lease, now: int, ttl_ms: int
) -> Lease:
    current = holder_of(conn.execute(sql.lease_row.sql, (lease.session_id,)).fetchone())
    new = renewed(current, lease, now, ttl_ms)
    params = {"session_id": lease.session_id, "expires_at": new.expires_at}
    conn.execute(sql.renew_lease.sql, sql.renew_lease.args(params))
    return new


def _release(conn: sqlite3.Connection, sql: WriteStatements, lease: Lease) -> bool:
    params = {"session_id": lease.session_id, "owner": lease.owner, "epoch": lease.epoch}
    return conn.execute(sql.release_lease.sql, sql.release_lease.args(params)).rowcount > 0


def _write_checkpoint(
    conn: sqlite3.Connection, sql: WriteStatements, checkpoint: CheckpointWrite
) -> bool:
    session_id = checkpoint.session_id
    found = conn.execute(sql.checkpoint_next_seq.sql, (session_id,)).fetchone()
    if found is None:
        raise SessionNotFoundError(session_id)
    if checkpoint.seq > found[0]:
        return False
    at = {"session_id": session_id, "seq": checkpoint.seq}
    conn.execute(sql.delete_checkpoint_at.sql, sql.delete_checkpoint_at.args(at))
    conn.execute(sql.insert_checkpoint.sql, sql.insert_checkpoint.args(checkpoint.row()))
    oldest = sql.oldest_kept_checkpoint
    kept = conn.execute(
        oldest.sql, oldest.args({"session_id": session_id, "take": 1, "skip": checkpoint.keep - 1})
    ).fetchone()
    if kept is not None:
        prune = sql.prune_checkpoints
        conn.execute(prune.sql, prune.args({"session_id": session_id, "oldest": kept[0]}))
    return True


def _delete_checkpoints(conn: sqlite3.Connection, sql: WriteStatements, session_id: str) -> int:
    return int(conn.execute(sql.delete_checkpoints.sql, (session_id,)).rowcount)


def _with_sa(
    _conn: sqlite3.Connection, writer: _Writer, fn: Callable[[Connection], T], write: bool
) -> T:
    with writer.configured_timeout():
        sa_conn = writer.engine().connect()
        try:
            if write:
                sa_conn = sa_conn.execution_options(**{_WRITE_OPTION: True})
            with sa_conn.begin():
                return fn(sa_conn)
        finally:
            sa_conn.close()


def _catch_up_on(conn: sqlite3.Connection, writer: _Writer, tables: Tables) -> int:
    """`indexer.catch_up_all` on the writer thread: every append committed before it."""
    written = catch_up_all(lambda fn, write: _with_sa(conn, writer, fn, write), tables)
    writer.unindexed = 0
    return written


_WAIT: Any = object()
"""`_Readers.inline`'s answer when the read would have to wait: run it on a reader thread."""


class _Readers:
    """Reader threads, each with its own connection, created as reads need them; and the
    short reads run inline on the caller's thread (`inline`, see the module docstring)."""

    def __init__(
        self,
        target: StoreURL,
        options: SQLiteOptions,
        reads: Mapping[str, CompiledRead],
        writer: threading.Thread,
    ) -> None:
        self._target = target
        self._options = options
        self._reads = reads
        self._executor = ThreadPoolExecutor(READERS, thread_name_prefix="todo-sessions-reader")
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._writer = writer
        self._inline_ok = options.journal_mode.upper() == "WAL"
        self._inline_lock = threading.Lock()
        """Held by an inline read, and by `close` (an inline read never waits for it)."""
        self._inline_local = threading.local()
        self._inline_conns: list[sqlite3.Connection] = []

    def inline(self, op: Callable[..., T], args: tuple[Any, ...]) -> T:
        """``op`` in a read transaction on this thread's own inline connection (WAL, busy
        timeout 0), or `_WAIT` where it would have to wait: SQLite answered busy (a WAL
        recovery, a connection in exclusive locking mode), the file is not in WAL mode, the
        store is closing, or this is the writer's thread (never a read beside its write
        transaction on the same thread)."""
        if not self._inline_ok or threading.current_thread() is self._writer:
            return _WAIT
        if not self._inline_lock.acquire(blocking=False):
            return _WAIT
        try:
            conn: sqlite3.Connection | None = getattr(self._inline_local, "conn", None)
            if conn is None:
                conn = self._open_inline()
                if conn is None:
                    return _WAIT
            if op in reads.ONE_STATEMENT:  # its own snapshot: no BEGIN ... ROLLBACK around it
                return op(SQLiteRows(conn, self._reads), *args)
            return _read_on(conn, self._reads, op, args)
        except sqlite3.Error:  # busy, or anything else: a reader thread tries (and tells)
            return _WAIT
        finally:
            self._inline_lock.release()

    def _open_inline(self) -> sqlite3.Connection | None:
        """This thread's inline connection: no busy timeout, no writes, and only on a file in
        WAL mode (else None, and no inline reads from then on). Opening it sets nothing that
        needs a lock (the writer has set WAL on the file already)."""
        target = self._target
        if target.path is None:
            self._inline_ok = False
            return None
        if self._options.read_only:
            uri, name = True, f"{target.path.as_uri()}?mode=ro{_immutable(target.path)}"
        else:
            uri, name = False, str(target.path)
        conn = sqlite3.connect(
            name, uri=uri, isolation_level=None, check_same_thread=False, timeout=0
        )
        try:
            conn.execute("PRAGMA query_only = ON")
            mode = conn.execute("PRAGMA journal_mode").fetchone()
        except BaseException:  # busy: try again next time
            conn.close()
            raise
        if mode is None or str(mode[0]).lower() != "wal":
            conn.close()
            self._inline_ok = False
            return None
        self._inline_local.conn = conn
        self._inline_conns.append(conn)
        return conn

    def _call(self, op: Callable[..., T], args: tuple[Any, ...]) -> T:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect_sqlite(self._target, self._options)
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return _read_on(conn, self._reads, op, args)

    async def run(self, op: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, self._call, op, args
        )

    def close(self) -> None:
        """Wait for running reads, then close every reader connection."""
        self._executor.shutdown(wait=True)
        with self._lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
        with self._inline_lock:
            self._inline_ok = False
            for conn in self._inline_conns:
                conn.close()
            self._inline_conns.clear()


class SQLiteRecorder(SnapshotReads):
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
        self._writer: _Writer | None = None
        self._readers: _Readers | None = None
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
        writer = _Writer(self._target, self._options, self._sql.append)
        try:
            await writer.call(_noop)  # connect now, so a bad file fails the open
        except BaseException:
            await writer.stop()
            raise
        writer.index_tables = None if self._options.read_only else self._namespace.tables
        self._writer = writer
        if self._target.path is not None:
            self._readers = _Readers(self._target, self._options, self._sql.reads, writer._thread)

    def _the_writer(self) -> _Writer:
        if self._writer is None:
            raise RuntimeError("the SQLite recorder is not open")
        return self._writer

    async def append(self, batch: AppendBatch) -> AppendOutcome:
        # `_Writer.append`, inlined: one coroutine less to start and resume per append.
        writer = self._writer
        if writer is None:
            raise RuntimeError("the SQLite recorder is not open")
        future: asyncio.Future[AppendOutcome] = asyncio.get_running_loop().create_future()
        writer._jobs.put(_AppendJob(batch, future))
        outcome = await future
        self._wakeups.wake(batch.session_id)  # followers here need not wait for their poll
        return outcome

    async def _snapshot(self, op: Callable[..., T], *args: Any) -> T:
        if self._readers is not None:
            return await self._readers.run(op, *args)
        return await self._the_writer().call(_read_on, self._sql.reads, op, args)

    async def _short(self, op: Callable[..., T], *args: Any) -> T:
        """A read of a few indexed rows: inline on the caller's thread where that never waits
        (`_Readers.inline`), else on a reader thread like any other."""
        readers = self._readers
        if readers is not None:
            found = readers.inline(op, args)
            if found is not _WAIT:
                return found
        return await self._snapshot(op, *args)

    async def latest_todos(self, session_id: str, upto_seq: int | None) -> list[TodoItem] | None:
        return await self._short(reads.latest_todos, session_id, upto_seq)

    async def latest_event(
        self, session_id: str, types: tuple[str, ...], upto_seq: int | None
    ) -> SessionEvent | None:
        return await self._short(reads.latest_event, session_id, types, upto_seq)

    async def _write(self, fn: Callable[..., T], *args: Any) -> T:
        writer = self._the_writer()
        return await writer.call(
            _in_write_transaction, writer.patience, fn, self._sql.writes, *args
        )

    async def delete(self, session_id: str) -> bool:
        return await self._write(_delete, session_id)

    async def acquire_lease(
        self, session_id: str, owner: str, now: int, ttl_ms: int, *, steal: bool
    ) -> Lease:
        return await self._write(_acquire, session_id, owner, now, ttl_ms, steal)

    async def renew_lease(self, lease: Lease, now: int, ttl_ms: int) -> Lease:
        return await self._write(_renew, lease, now, ttl_ms)

    async def release_lease(self, lease: Lease) -> bool:
        return await self._write(_release, lease)

    async def write_checkpoint(self, checkpoint: CheckpointWrite) -> bool:
        return await self._write(_write_checkpoint, checkpoint)

    async def delete_checkpoints(self, session_id: str) -> int:
        return await self._write(_delete_checkpoints, session_id)

    async def schema_revision(self) -> str | None:
        namespace = self._namespace
        return await self.run_maintenance(
            lambda c: revisions.schema_revision(c, namespace), write=False
        )

    async def migrate(self, revision: str, *, downgrade: bool = False) -> str | None:
        namespace = self._namespace
        return await self.run_locked(lambda c: revisions.step(c, revision, downgrade, namespace))

    def wait_for_append(self, session_id: str) -> AbstractAsyncContextManager[Wait]:
        """SQLite has no notifications across processes: followers poll every
        ``poll_interval``, and an append through this store wakes them at once."""
        return self._wakeups.polling(session_id)

    async def check_integrity(self) -> list[str]:
        """``PRAGMA integrity_check`` (every page, index entry and constraint) and ``PRAGMA
        foreign_key_check`` (events whose session row is gone)."""
        writer = self._the_writer()
        return await writer.call(_integrity_check_on, writer, self._tables)

    async def catch_up_index(self) -> int:
        writer = self._the_writer()
        return await writer.call(_catch_up_on, writer, self._namespace.tables)

    async def run_locked(self, fn: Callable[[Connection], T]) -> T:
        writer = self._the_writer()
        return await writer.call(_with_sa, writer, fn, True)

    async def run_maintenance(self, fn: Callable[[Connection], T], *, write: bool) -> T:
        writer = self._the_writer()
        return await writer.call(_with_sa, writer, fn, write)

    async def close(self) -> None:
        writer, readers = self._writer, self._readers
        self._writer = self._readers = None
        if writer is None:
            return
        if readers is not None:  # waits for running reads, on the writer thread
            await writer.call(_close_readers, readers)
        await writer.stop()


def _close_readers(_conn: None, readers: _Readers) -> None:
    readers.close()


_WITHOUT_CONNECTION = frozenset({_close_writer, _close_readers})
"""Writer-thread calls that need no connection (closing must never open one)."""


def _noop(conn: sqlite3.Connection) -> None:
    return None


# -- this driver's half of error translation, and a host's connections --------------------------


def is_driver_error(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error)


_LOCKED_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_UNIQUE_CODES = frozenset({sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE})
_SEQ_TAKEN = "that seq already exists"
"""The message of our own trigger that refuses a replaced event row (revision 0003)."""


def classify_error(exc: BaseException) -> str | None:
    """``locked`` (busy or locked past the busy timeout), ``missing`` (no such table),
    ``unique`` (a primary-key or unique violation), or None: by the ``sqlite3`` exception's
    class and (extended) error code; SQLite gives a missing table no code of its own."""
    if not isinstance(exc, sqlite3.Error):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    text = str(exc).lower()
    if isinstance(exc, sqlite3.OperationalError):
        if code is not None and code & 0xFF in _LOCKED_CODES:
            return "locked"
        if code is None and ("locked" in text or "busy" in text):  # raised without a code
            return "locked"
        if "no such table" in text:
            return "missing"
    if isinstance(exc, sqlite3.IntegrityError) and (code in _UNIQUE_CODES or _SEQ_TAKEN in text):
        return "unique"
    return None


def lock_host_connection(connection: Connection, *, began: bool) -> None:
    """A host's connection about to be migrated: in a transaction we just began, through the
    standard ``sqlite3`` driver (whose legacy transaction control would run each DDL
    statement on its own), take the write lock and make the migration one transaction. In the
    host's own transaction there is nothing to take: it holds its locks already."""
    if not began:
        return
    driver = connection.connection.driver_connection
    legacy = getattr(sqlite3, "LEGACY_TRANSACTION_CONTROL", -1)  # Python 3.12+
    if (
        isinstance(driver, sqlite3.Connection)
        and not driver.in_transaction
        and getattr(driver, "autocommit", legacy) == legacy
    ):
        connection.exec_driver_sql(BEGIN_WRITE)


async def run_locked_on_engine(engine: AsyncEngine, fn: Callable[[Connection], T]) -> T:
    """``fn(sync connection)`` on a host's SQLite `AsyncEngine` (aiosqlite), in one
    transaction that starts with ``BEGIN IMMEDIATE``."""
    async with engine.connect() as conn:
        await conn.exec_driver_sql(BEGIN_WRITE)
        try:
            result = await conn.run_sync(fn)
        except BaseException:
            await conn.rollback()
            raise
        await conn.commit()
        return result
