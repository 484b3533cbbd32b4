"""A throwaway Patroni cluster on loopback for the failover tests and benchmark.

One etcd 3.4 (``--enable-v2=true``: Patroni's ``etcd:`` section speaks the v2 API) and three
Patroni members, each running its own PostgreSQL 15 from Debian's binaries
(``/usr/lib/postgresql/15/bin``) as the ``postgres`` user, in a temporary directory, on free
ports: the machine's own server is never touched. ``synchronous_mode: true`` (a commit waits for
the synchronous standby, which Patroni promotes), ``primary_start_timeout: 0`` (a crashed primary
is failed over at once, not restarted in place for up to 300 s), ``loop_wait: 1``, ``ttl: 10``
by default (``Cluster(ttl=...)``: the tests use 8) and ``retry_timeout`` the most Patroni allows
under it (``ttl >= loop_wait + 2 * retry_timeout``).

Every process is started in a session of its own and ended with its whole process group
(`Cluster.stop`): etcd, each Patroni, and each postmaster (Patroni starts it with ``setsid``, so
it outlives its Patroni unless killed too). Also a script (``python tests/patroni_cluster.py``)
that starts a cluster, prints its multi-host URL and waits for Ctrl-C (docs/design.md,
"PostgreSQL under Patroni").
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from pg_cluster import BIN, free_port

__all__ = ["Cluster", "Member", "available", "missing"]

TTL = 10
"""The leader key's time to live by default (the benchmark's; the tests take a shorter one)."""
LOOP_WAIT = 1


def missing() -> str | None:
    """Why a cluster cannot start here (what to install), or None."""
    needed = {"patroni": "patroni", "patronictl": "patroni", "etcd": "etcd-server"}
    absent = sorted({pkg for exe, pkg in needed.items() if shutil.which(exe) is None})
    if absent:
        return f"needs Debian's {' and '.join(absent)} (apt-get install patroni etcd-server)"
    if not (BIN / "initdb").exists():
        return f"needs PostgreSQL 15's binaries in {BIN}"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "needs runuser to run Patroni as the postgres user"
    return None


def available() -> bool:
    return missing() is None


def _as_postgres(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _own(path: Path) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")


def _killpg(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after its closing paren
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            found.append(int(entry.name))
    return found


class Member:
    """One Patroni member: its Patroni process, its PostgreSQL port and data directory."""

    def __init__(self, cluster: Cluster, name: str) -> None:
        self.cluster = cluster
        self.name = name
        self.port = free_port()
        self.api_port = free_port()
        self.data = cluster.root / f"{name}.data"
        self.config = cluster.root / f"{name}.yml"
        self.log = cluster.root / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def write_config(self) -> None:
        c = self.cluster
        sockets = c.root / "sockets"
        config: dict[str, Any] = {
            "scope": c.scope,
            "namespace": "/todo_sessions/",
            "name": self.name,
            "log": {"level": "WARNING"},
            "restapi": {
                "listen": f"127.0.0.1:{self.api_port}",
                "connect_address": f"127.0.0.1:{self.api_port}",
            },
            "etcd": {"host": f"127.0.0.1:{c.etcd_port}", "protocol": "http"},
            "bootstrap": {
                "dcs": c.dcs_settings(),
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}, {"auth": "trust"}],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{self.port}",
                "connect_address": f"127.0.0.1:{self.port}",
                "data_dir": str(self.data),
                "bin_dir": str(BIN),
                "pgpass": str(c.root / f"{self.name}.pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres"},
                    "replication": {"username": "postgres"},
                    "rewind": {"username": "postgres"},
                },
                "parameters": {"unix_socket_directories": str(sockets)},
                "pg_hba": [
                    "local all all trust",
                    "local replication all trust",
                    "host all all 127.0.0.1/32 trust",
                    "host replication all 127.0.0.1/32 trust",
                ],
            },
        }
        # JSON is YAML: no YAML writer needed
        self.config.write_text(json.dumps(config, indent=1))
        _own(self.config)

    def start(self) -> None:
        log = self.log.open("ab")
        try:
            self.process = subprocess.Popen(
                _as_postgres(["patroni", str(self.config)]),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def status(self) -> dict[str, Any]:
        """Patroni's own view (``GET /patroni``): role, state, ...; {} when unreachable."""
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.api_port}/patroni", timeout=2
            ) as answer:
                return dict(json.loads(answer.read()))
        except (OSError, ValueError):
            return {}

    def server_pids(self) -> list[int]:
        """The postmaster and its children (backends, walsenders, ...: each child of a
        postmaster calls ``setsid``, so they are not in its process group)."""
        pid = self.postmaster_pid()
        if pid is None:
            return []
        return [pid, *_children(pid)]

    def signal_all(self, sig: int) -> None:
        """``sig`` to this member's Patroni and its PostgreSQL (postmaster and backends)."""
        if self.process is not None:
            _killpg(self.process.pid, sig)
        for pid in self.server_pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def kill_postmaster(self) -> None:
        """``kill -9`` of the postmaster only (its backends die with it; Patroni lives on)."""
        pid = self.postmaster_pid()
        if pid is None:
            raise RuntimeError(f"{self.name} has no postmaster")
        os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        self.signal_all(signal.SIGCONT)
        self.signal_all(signal.SIGKILL)
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)


class Cluster:
    """etcd and three Patroni members; `wait_healthy` until a leader and a sync standby."""

    def __init__(
        self,
        *,
        members: int = 3,
        synchronous: bool = True,
        failsafe: bool = False,
        ttl: int = TTL,
    ) -> None:
        if ttl < LOOP_WAIT + 2:
            raise ValueError(f"ttl {ttl}: Patroni needs ttl >= loop_wait + 2 * retry_timeout")
        self.root = Path(tempfile.mkdtemp(prefix="todo_sessions_patroni_"))
        os.chmod(self.root, 0o755)
        _own(self.root)
        (self.root / "sockets").mkdir(mode=0o700)
        _own(self.root / "sockets")
        self.scope = f"ts{os.getpid()}x{free_port()}"
        self.synchronous = synchronous
        self.failsafe = failsafe
        self.ttl = ttl
        self.etcd_port, self.etcd_peer_port = free_port(), free_port()
        self.etcd: subprocess.Popen[bytes] | None = None
        self.members = [Member(self, f"m{i + 1}") for i in range(members)]

    def dcs_settings(self) -> dict[str, Any]:
        return {
            "ttl": self.ttl,
            "loop_wait": LOOP_WAIT,
            "retry_timeout": (self.ttl - LOOP_WAIT) // 2,
            "maximum_lag_on_failover": 1048576,
            "synchronous_mode": self.synchronous,
            "primary_start_timeout": 0,
            "failsafe_mode": self.failsafe,
            "postgresql": {
                "use_pg_rewind": True,
                "parameters": {
                    "shared_buffers": "16MB",
                    "max_connections": 200,  # writer processes and followers reconnecting at once
                    "max_wal_senders": 6,
                    "max_replication_slots": 6,
                    "wal_keep_size": "64MB",
                    "min_wal_size": "32MB",
                    "max_wal_size": "128MB",
                    "hot_standby": "on",
                    "wal_receiver_status_interval": "1s",
                },
            },
        }

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> None:
        self.start_etcd()
        for member in self.members:
            member.write_config()
        self.members[0].start()  # bootstraps (initdb), the others clone it
        self._until(lambda: self.leader() is not None, timeout, "no leader was elected")
        for member in self.members[1:]:
            member.start()
        self.wait_healthy(timeout)

    def start_etcd(self) -> None:
        data = self.root / "etcd"
        log = (self.root / "etcd.log").open("ab")
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        try:
            self.etcd = subprocess.Popen(
                [
                    "etcd",
                    "--name=etcd0",
                    f"--data-dir={data}",
                    f"--listen-client-urls={client}",
                    f"--advertise-client-urls={client}",
                    f"--listen-peer-urls={peer}",
                    f"--initial-advertise-peer-urls={peer}",
                    f"--initial-cluster=etcd0={peer}",
                    "--enable-v2=true",
                    "--log-level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        self._until(self._etcd_up, 30, "etcd never answered")

    def _etcd_up(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.etcd_port}/health", timeout=1
            ) as answer:
                return bool(json.loads(answer.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def stop_etcd(self) -> None:
        if self.etcd is not None:
            _killpg(self.etcd.pid, signal.SIGKILL)
            self.etcd.wait(timeout=10)

    def stop(self) -> None:
        """Kill everything, then remove the directory."""
        for member in self.members:
            member.stop()
        if self.etcd is not None and self.etcd.poll() is None:
            self.stop_etcd()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- state -------------------------------------------------------------------------------

    def leader(self) -> Member | None:
        """The member that is a running primary, if exactly one says so."""
        leaders = [
            m
            for m in self.members
            if (s := m.status()).get("role") in ("master", "primary")
            and s.get("state") == "running"
        ]
        return leaders[0] if len(leaders) == 1 else None

    def healthy(self) -> bool:
        """Patroni's view (``GET /cluster``) and the servers' agree: one running leader, every
        other member a replica streaming from it, and (in synchronous mode) one of them the
        synchronous standby in the DCS too (Patroni fails over only to that one)."""
        leader = self.leader()
        if leader is None:
            return False
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{leader.api_port}/cluster", timeout=2
            ) as answer:
                members = json.loads(answer.read()).get("members", [])
        except (OSError, ValueError):
            return False
        roles = sorted(m.get("role") for m in members)
        if len(members) != len(self.members) or roles.count("leader") != 1:
            return False
        if any(m.get("state") not in ("running", "streaming") for m in members):
            return False
        replication = leader.status().get("replication") or []
        streaming = [r for r in replication if r.get("state") == "streaming"]
        if len(streaming) != len(self.members) - 1:
            return False
        if not self.synchronous:
            return True
        return "sync_standby" in roles and any(r.get("sync_state") == "sync" for r in streaming)

    def wait_healthy(self, timeout: float = 120.0) -> None:
        self._until(self.healthy, timeout, "the cluster never became healthy")

    def _until(self, check: Any, timeout: float, message: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.2)
        raise RuntimeError(f"{message}: {self.describe()}")

    def describe(self) -> str:
        return "; ".join(
            f"{m.name}:{m.status().get('role')}/{m.status().get('state')}" for m in self.members
        )

    # -- faults and URLs ---------------------------------------------------------------------

    def url(self, database: str = "postgres") -> str:
        hosts = ",".join(f"127.0.0.1:{m.port}" for m in self.members)
        return f"postgresql://postgres@{hosts}/{database}?target_session_attrs=read-write"

    def switchover(self, candidate: Member | None = None) -> None:
        leader = self.leader()
        if leader is None:
            raise RuntimeError(f"no leader to switch over from: {self.describe()}")
        command = [
            "patronictl",
            "-c",
            str(leader.config),
            "switchover",
            self.scope,
            "--leader",
            leader.name,
            "--force",
        ]
        if candidate is not None:
            command += ["--candidate", candidate.name]
        done = subprocess.run(
            _as_postgres(command), capture_output=True, text=True, timeout=60, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"patronictl switchover failed: {done.stdout}{done.stderr}")


def main() -> None:
    import sys

    reason = missing()
    if reason:
        raise SystemExit(reason)
    cluster = Cluster(synchronous="--async" not in sys.argv)
    try:
        cluster.start()
        print(cluster.url(), flush=True)
        print(f"patronictl -c {cluster.members[0].config} list", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
