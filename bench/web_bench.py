"""How fast the browser viewer opens a large session (issue #16: a 100k-event session page
opens in under 1 s).

    python bench/web_bench.py [--events 100000] [--repeat 5]

Builds one session of about ``--events`` events (the realistic mix of
bench/projections_bench.py: turns of a user message, steps with streamed chunks, an assistant
message, a tool call and its result, a todo write every other step) in a fresh SQLite file,
starts ``todo-sessions serve`` on it in a child process, and times whole HTTP requests from a
client (first request, then the median of ``--repeat``):

- the session page at its end (the default view), in the middle and at seq 0;
- the JSON state at the end (what the slider fetches; ``html=1`` as the page asks for it);
- a timeline page;
- the session list.

The target is the session page at the end under 1 s. The library's own
``store.derive_messages`` at the end is timed too (in process, before the server starts): the
message pane needs it, and it is most of the page's cost on a large session.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from projections_bench import T0, build

from todo_sessions import SessionHeader, SessionStore

SESSION = "bench-web"


async def derive_ms(url: str, repeat: int) -> float:
    """The median of the library call the page's message pane needs at the end, in process:
    what the viewer adds is the rest."""
    async with SessionStore(url) as store:
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            await store.derive_messages(SESSION)
            samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


async def make(url: str, size: int) -> int:
    events = build(size)
    async with SessionStore(url, synchronous="NORMAL") as store:
        await store.create(SessionHeader(id=SESSION, created_at=T0, cwd="/bench", title="bench"))
        for i in range(0, len(events), 5000):
            await store.append(SESSION, events[i : i + 5000])
    return len(events)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def get(url: str) -> tuple[float, int]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as answer:
        body = answer.read()
    return time.perf_counter() - start, len(body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        url = f"sqlite:///{work}/bench.db"
        started = time.perf_counter()
        count = asyncio.run(make(url, args.events))
        print(f"built {count} events in {time.perf_counter() - started:.1f} s")
        derive = asyncio.run(derive_ms(url, args.repeat))
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        command = [sys.executable, "-m", "todo_sessions", "--db", url, "serve", "--port", str(port)]
        server = subprocess.Popen(command, stderr=subprocess.DEVNULL)
        try:
            for _ in range(300):
                try:
                    get(base + "/api/sessions")
                    break
                except OSError:
                    time.sleep(0.1)
            middle = count // 2
            cases = [
                ("session page, at the end", f"/sessions/{SESSION}"),
                ("session page, middle", f"/sessions/{SESSION}?at={middle}"),
                ("session page, seq 0", f"/sessions/{SESSION}?at=0"),
                ("state JSON (html=1), end", f"/api/sessions/{SESSION}/state?html=1"),
                ("state JSON, all messages, end", f"/api/sessions/{SESSION}/state"),
                ("timeline page, middle", f"/api/sessions/{SESSION}/timeline?at={middle}"),
                ("session list", "/"),
            ]
            print(
                f"python {platform.python_version()}   sqlite {sqlite3.sqlite_version}   "
                f"cpus {os.cpu_count()}   session of {count} events"
            )
            head = f"{'request':<32} {'first':>9} {'median':>9} {'size':>10}"
            print(head)
            print("-" * len(head))
            results = {}
            for name, path in cases:
                first, size = get(base + path)
                samples = [get(base + path)[0] for _ in range(args.repeat)]
                median = statistics.median(samples)
                results[name] = max(first, median)
                print(f"{name:<32} {first * 1000:>6.0f} ms {median * 1000:>6.0f} ms {size:>8} B")
        finally:
            server.terminate()
            server.wait(timeout=10)
    worst = results["session page, at the end"]
    verdict = "ok" if worst < 1.0 else "MISSED"
    print(
        f"\nsession page at the end: {worst * 1000:.0f} ms (target < 1000 ms): {verdict}; "
        f"store.derive_messages alone, in process: {derive:.0f} ms"
    )


if __name__ == "__main__":
    main()
