"""Throwaway PostgreSQL primaries and standbys for the failover tests and benchmark.

Built from Debian's binaries (``/usr/lib/postgresql/15/bin``: ``initdb``, ``pg_ctl``,
``pg_basebackup -R``) as the ``postgres`` user, in a temporary directory, on free ports; the
machine's own server is never touched. `Template` runs ``initdb`` once; each `Pair` copies it
(a primary) and takes a base backup of it (a standby streaming from it), so a pair costs about
a second. Durability settings stay the server's defaults (``fsync`` on): only sizes are small.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

BIN = Path(os.environ.get("TODO_SESSIONS_PG_BIN", "/usr/lib/postgresql/15/bin"))

__all__ = ["BIN", "Pair", "Server", "Template", "available", "free_port"]


def available() -> bool:
    """Whether this machine can start servers of its own (the binaries, and a postgres user
    to run them as when we are root)."""
    if not (BIN / "initdb").exists() or not (BIN / "pg_basebackup").exists():
        return False
    if os.geteuid() != 0:
        return True
    return shutil.which("runuser") is not None and _user_exists("postgres")


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(*args: str | os.PathLike[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    command = [os.fspath(a) for a in args]
    if os.geteuid() == 0:  # the server refuses to run as root
        command = ["runuser", "-u", "postgres", "--", *command]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stdout}{done.stderr}")
    return done


def _own(path: Path) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")


_SETTINGS = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{sockets}'
shared_buffers = 16MB
max_connections = 40
max_wal_senders = 4
wal_level = replica
wal_keep_size = 32MB
min_wal_size = 2MB
max_wal_size = 64MB
hot_standby = on
hot_standby_feedback = on
wal_receiver_status_interval = 1s
log_min_messages = warning
logging_collector = off
"""


class Server:
    """One server of a `Pair`: its data directory and port."""

    def __init__(self, data: Path, port: int, sockets: Path, log: Path) -> None:
        self.data = data
        self.port = port
        self.sockets = sockets
        self.log = log

    @property
    def url(self) -> str:
        return self.url_for("postgres")

    def url_for(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    @property
    def dsn(self) -> str:
        return self.url

    def configure(self, extra: str = "") -> None:
        conf = self.data / "postgresql.conf"
        with conf.open("a") as f:
            f.write(_SETTINGS.format(port=self.port, sockets=self.sockets) + extra)

    def start(self) -> None:
        _run(BIN / "pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        _run(BIN / "pg_ctl", "-D", self.data, "-m", mode, "-w", "stop", check=False)

    def promote(self) -> None:
        _run(BIN / "pg_ctl", "-D", self.data, "-w", "-t", "60", "promote")

    def running(self) -> bool:
        return _run(BIN / "pg_ctl", "-D", self.data, "status", check=False).returncode == 0


class Template:
    """An ``initdb``-ed data directory, copied for each primary."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="todo_sessions_pg_"))
        os.chmod(self.root, 0o755)
        _own(self.root)
        self.data = self.root / "template"
        _run(
            BIN / "initdb",
            "-D",
            self.data,
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",  # only the template: every server's own writes are fsynced
            "--wal-segsize=1",  # 1 MB segments: less to copy for each server
            "-E",
            "UTF8",
            "--locale=C",
        )
        self._count = 0

    def _dir(self, name: str) -> Path:
        self._count += 1
        path = self.root / f"{name}{self._count}"
        path.mkdir(mode=0o700)
        _own(path)
        return path

    def pair(self, *, synchronous: bool) -> Pair:
        return Pair(self, synchronous=synchronous)

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class Pair:
    """A primary and a standby streaming from it (``synchronous``: the standby is the
    primary's synchronous standby, ``synchronous_commit = on``)."""

    def __init__(self, template: Template, *, synchronous: bool) -> None:
        self.synchronous = synchronous
        base = template._dir("pair")
        sockets = base / "sockets"
        sockets.mkdir(mode=0o700)
        _own(sockets)
        primary_data = base / "primary"
        _run("cp", "-a", template.data, primary_data)
        self.primary = Server(primary_data, free_port(), sockets, base / "primary.log")
        extra = "synchronous_standby_names = '*'\n" if synchronous else ""
        self.primary.configure(extra)
        self.primary.start()
        standby_data = base / "standby"
        self.standby = Server(standby_data, free_port(), sockets, base / "standby.log")
        _run(
            BIN / "pg_basebackup",
            "-D",
            standby_data,
            "-h",
            "127.0.0.1",
            "-p",
            str(self.primary.port),
            "-U",
            "postgres",
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            # the copy itself is not flushed (a test's throwaway standby); the standby server
            # fsyncs everything it writes from then on, as any server does
            "--no-sync",
        )
        self.standby.configure(
            f"primary_conninfo = 'host=127.0.0.1 port={self.primary.port} user=postgres "
            "application_name=standby'\n"
            # promoted, it must not wait for a synchronous standby of its own
            "synchronous_standby_names = ''\n"
        )
        self.standby.start()
        self.wait_streaming()

    def wait_streaming(self, timeout: float = 30.0) -> None:
        """Until the primary sees its standby streaming (synchronous when asked)."""
        want = "sync" if self.synchronous else "async"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = _psql(
                self.primary,
                "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'",
            )
            if want in done.split():
                return
            time.sleep(0.05)
        raise RuntimeError(f"the standby never streamed ({want})")

    def multi_host_url(
        self, *, attrs: str = "read-write", standby_first: bool = False, database: str = "postgres"
    ) -> str:
        a, b = self.primary.port, self.standby.port
        if standby_first:
            a, b = b, a
        return (
            f"postgresql://postgres@127.0.0.1:{a},127.0.0.1:{b}/{database}"
            f"?target_session_attrs={attrs}"
        )

    def stop(self) -> None:
        for server in (self.standby, self.primary):
            with contextlib.suppress(Exception):
                server.stop("immediate")


def _psql(server: Server, sql: str) -> str:
    done = _run(
        BIN / "psql",
        "-h",
        "127.0.0.1",
        "-p",
        str(server.port),
        "-U",
        "postgres",
        "-d",
        "postgres",
        "-Atc",
        sql,
        check=False,
    )
    return done.stdout


def psql(server: Server, sql: str) -> str:
    """Run ``sql`` on ``server`` with psql; its unaligned output."""
    return _psql(server, sql)


@contextlib.contextmanager
def template() -> Iterator[Template]:
    made = Template()
    try:
        yield made
    finally:
        made.cleanup()
