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
  index"): each leaves its session marked (`indexer`), and the writer thread catches the
  index up once it has had no job for `INDEX_IDLE` (and at most once per `INDEX_EVERY`), or
  between jobs past `INDEX_BACKLOG` events (`Writer._next_job`); a search catches up
  whatever is left first (`catch_up_index`). In WAL mode with ``synchronous=FULL`` the
  catch-up transactions commit with NORMAL, no fsync of their own
  (`Writer.index_transaction`).
- **Reader threads** (two) each own a read connection; a read operation runs as one function
  inside one read transaction (a consistent WAL snapshot). An in-memory database has a single
  connection, so there the writer thread serves reads too (no reader threads).
- Every write (appends, deletes, leases, checkpoints) runs compiled statements on that
  connection, inside ``BEGIN IMMEDIATE`` (`_write`, the one write transaction of this module;
  the group commit adds savepoints): one write stack. The statements are compiled once per
  namespace from the SQLAlchemy Core definitions (`namespace.Namespace.compiled`).
- Migrations (`run_locked`) get a SQLAlchemy connection
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
  connection has busy timeout 0 and its ``BEGIN IMMEDIATE`` retries after 1 ms, then every
  2 ms, until the configured busy timeout has passed. SQLite's own busy handler sleeps 1,
  2, 5, 10, ... 100 ms (``sqlite3`` cannot install another), far longer than another
  process's append holds the lock. Not shorter than 1 ms: each try pins the WAL for a moment,
  and tries every 20 µs kept the WAL from starting over, a checkpoint per commit
  (`driver._FIRST_WAIT`). Migrations, search catch-ups and the integrity check run with
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

Inside: `driver` (connections, the write lock's wait, compiled statements, error
classification), `writer` (the writer thread), `handoff` (jobs and results between threads),
`transactions` (the write transactions' statements), `readers` (reader threads and inline
reads), `integrity` (the engine's check), `recorder` (`SQLiteRecorder`).
"""

from __future__ import annotations

from .driver import classify_error, is_driver_error, lock_host_connection, run_locked_on_engine
from .recorder import SQLiteRecorder

__all__ = [
    "SQLiteRecorder",
    "classify_error",
    "is_driver_error",
    "lock_host_connection",
    "run_locked_on_engine",
]
