"""Start-up time of ``todo-sessions --version`` and ``--help`` (under 100 ms on a quiet machine).

Run:  python bench/cli_startup_bench.py [--rounds 5] [--before DIR]

Each round starts, alternately and in one run, fresh processes (the same interpreter as this
script, with ``-X frozen_modules=on`` left at its default):

- ``python -c pass``: the interpreter's own start-up, the floor;
- ``--version`` and ``--help`` of the console script (``todo_sessions._console:main``, as the
  installed ``todo-sessions`` runs it);
- ``--version`` with the modules of ``list`` and ``show`` loaded first (``cli.sessions``: the
  store, rich, the rendering): what start-up would cost if the command line loaded the library
  up front;
- with ``--before DIR`` (a directory holding another checkout's ``todo_sessions`` package, e.g.
  ``git archive d12fdba todo_sessions | tar -x -C DIR``), ``--version`` and ``--help`` of that
  code too, in the same rounds.

The table shows the MEDIAN wall-clock ms of each over the rounds with the spread (min-max),
never the best run, and the median CPU ms (user + system: what the process itself spent,
which a busy machine inflates less than the wall clock). Target: ``--version`` and
``--help`` medians under 100 ms.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_MS = 100.0

CONSOLE = "import sys; sys.argv[0] = 'todo-sessions'; from todo_sessions._console import main; "
CASES: list[tuple[str, str, list[str]]] = [
    ("python -c pass (floor)", "pass", []),
    ("todo-sessions --version", CONSOLE + "main()", ["--version"]),
    ("todo-sessions --help", CONSOLE + "main()", ["--help"]),
    (
        "--version, library loaded (before)",
        CONSOLE + "import todo_sessions.cli.sessions; main()",
        ["--version"],
    ),
]


def run_once(code: str, args: list[str], path: str | None = None) -> tuple[float, float]:
    """Wall-clock and CPU (user + system) ms of one process. It starts outside the checkout,
    so ``path`` (or the installed package) is what it imports, not the working directory."""
    env = dict(os.environ, PYTHONPATH=path) if path else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    command = [sys.executable, "-c", code, *args]
    subprocess.run(
        command, check=True, stdout=subprocess.DEVNULL, env=env, cwd=tempfile.gettempdir()
    )
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def main(rounds: int, before: str | None) -> None:
    print(f"python {platform.python_version()}, {platform.machine()}; {rounds} alternating rounds")
    print("median wall-clock ms per process start (min-max over rounds)\n")
    cases = [(label, code, args, None) for label, code, args in CASES]
    if before:
        for flag in ("--version", "--help"):
            cases.append((f"{flag}, code in --before", CONSOLE + "main()", [flag], before))
    samples: dict[str, list[float]] = {label: [] for label, _, _, _ in cases}
    cpu: dict[str, list[float]] = {label: [] for label, _, _, _ in cases}
    for _label, code, args, path in cases:  # warm the .pyc files and the page cache
        run_once(code, args, path)
    for number in range(rounds):
        order = cases if number % 2 == 0 else cases[::-1]
        for label, code, args, path in order:
            wall, used = run_once(code, args, path)
            samples[label].append(wall)
            cpu[label].append(used)
    print(f"{'command':<36} {'median':>8}  {'spread':>15}  {'cpu ms':>7}  target")
    for label, _, _, _ in cases:
        got = samples[label]
        median = statistics.median(got)
        verdict = ""
        if label.startswith("todo-sessions"):
            verdict = "ok" if median < TARGET_MS else "OVER"
        spread = f"{min(got):.0f}-{max(got):.0f}"
        used = statistics.median(cpu[label])
        print(f"{label:<36} {median:8.0f}  {spread:>15}  {used:7.0f}  {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", help="a directory holding another todo_sessions package")
    arguments = parser.parse_args()
    main(arguments.rounds, arguments.before)
