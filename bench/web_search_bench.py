"""What one search request costs the browser viewer, and whether the viewer keeps answering
while it runs (issue #39: ``/search?q=<32 prefix terms>&limit=500`` over sessions with long
texts held the event loop for 17 s).

    python bench/web_search_bench.py [--sessions 100] [--chars 100000] [--rounds 3]
                                     [--baseline DIR]

Builds ``--sessions`` sessions in a fresh SQLite file, each with one user message of about
``--chars`` characters that every query below matches, at its end (half of them with accented
words, so that their snippets are folded word by word), starts ``todo-sessions serve`` on it in
a child process and sends, one at a time:

- issue 39's request: 31 prefix terms and a word, ``limit=500``;
- the largest request the viewer runs: 8 terms, 4 of them prefixes, ``limit=100``.

While each runs, another thread asks for ``/api/sessions?limit=1`` every 20 ms; the longest
of those answers is how long the viewer stopped answering. With ``--baseline DIR`` (another
checkout of the package, e.g. ``git archive`` of an earlier commit unpacked in DIR), the same
server is started from DIR's code too, in alternating rounds; medians over the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from todo_sessions import SessionEvent, SessionHeader, SessionStore

HERE = Path(__file__).resolve().parent.parent
T0 = 1_764_000_000_000
PREFIXES = [f"w{n}abc" for n in range(31)]
WORDS = ["alpha", "beta", "gamma", "delta", "kappa", "sigma", "omega", "lambda"]
ACCENTED = ["délta", "théta", "ça", "naïve"]
CASES = {
    "issue 39 (32 terms, limit 500)": {
        "q": " ".join(f"w{n}*" for n in range(31)) + " needle",
        "limit": "500",
    },
    "largest run (8 terms, limit 100)": {
        "q": "w0* w1* w2* w3* needle alpha beta gamma",
        "limit": "100",
    },
}


def body(rng: random.Random, chars: int, accented: bool) -> str:
    """Filler words, then every word the queries look for (the first match at the end: the
    most a snippet scans)."""
    vocabulary = WORDS + (ACCENTED if accented else [])
    tail = [*PREFIXES, "needle", "alpha", "beta", "gamma"]
    out: list[str] = []
    size = sum(len(w) + 1 for w in tail)
    while size < chars:
        word = rng.choice(vocabulary) + str(rng.randint(0, 999))
        out.append(word)
        size += len(word) + 1
    return " ".join(out + tail)


async def make(url: str, sessions: int, chars: int) -> None:
    rng = random.Random(39)
    async with SessionStore(url, synchronous="NORMAL") as store:
        for n in range(sessions):
            sid = f"s{n}"
            await store.create(SessionHeader(id=sid, created_at=T0, title=sid))
            content = [{"type": "text", "text": body(rng, chars, accented=n % 2 == 1)}]
            data = {"id": f"u{n}", "role": "user", "content": content, "source": {"kind": "user"}}
            event = SessionEvent("user/message", 0, T0, data, surface_op="append")
            await store.append(sid, [event])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def get(url: str) -> tuple[float, int, bytes]:
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=600) as answer:
            status, data = answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        status, data = exc.code, exc.read()
    return time.perf_counter() - start, status, data


def measure(base: str, params: dict[str, str]) -> tuple[float, int, float]:
    """The request's seconds and status, and the longest answer to a ping meanwhile."""
    longest = [0.0]
    done = threading.Event()

    def ping() -> None:
        while not done.is_set():
            longest[0] = max(longest[0], get(base + "/api/sessions?limit=1")[0])
            time.sleep(0.02)

    pinger = threading.Thread(target=ping)
    pinger.start()
    time.sleep(0.1)
    try:
        seconds, status, _ = get(base + "/api/search?" + urllib.parse.urlencode(params))
    finally:
        done.set()
        pinger.join()
    return seconds, status, longest[0]


def serve(tree: Path, url: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, "-m", "todo_sessions", "--db", url, "serve", "--port", str(port)]
    server = subprocess.Popen(command, env=env, cwd=tree, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            get(base + "/api/sessions?limit=1")
            return server, base
        except OSError:
            time.sleep(0.1)
    server.terminate()
    raise RuntimeError(f"the server of {tree} did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--chars", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, default=None)
    args = parser.parse_args()
    trees = {"this tree": HERE}
    if args.baseline is not None:
        trees["baseline"] = args.baseline.resolve()
    results: dict[tuple[str, str], list[tuple[float, int, float]]] = {}
    with tempfile.TemporaryDirectory() as work:
        url = f"sqlite:///{work}/bench.db"
        asyncio.run(make(url, args.sessions, args.chars))
        for _ in range(args.rounds):
            for name, tree in trees.items():
                server, base = serve(tree, url)
                try:
                    for case, params in CASES.items():
                        results.setdefault((name, case), []).append(measure(base, params))
                finally:
                    server.terminate()
                    server.wait(timeout=10)
    print(f"{args.sessions} sessions of {args.chars} characters, {args.rounds} rounds")
    head = f"{'tree':<10} {'request':<34} {'status':>6} {'request s':>16} {'longest ping s':>16}"
    print(head)
    print("-" * len(head))
    for (name, case), samples in results.items():
        seconds = [s for s, _, _ in samples]
        pings = [p for _, _, p in samples]
        status = ",".join(sorted({str(c) for _, c, _ in samples}))
        spread = f"{statistics.median(seconds):.2f} ({min(seconds):.2f}-{max(seconds):.2f})"
        ping = f"{statistics.median(pings):.2f} ({min(pings):.2f}-{max(pings):.2f})"
        print(f"{name:<10} {case:<34} {status:>6} {spread:>16} {ping:>16}")


if __name__ == "__main__":
    main()
