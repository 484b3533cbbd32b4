"""Start-up time of ``todo-sessions --version`` and ``--help`` (issue #26: under 200 ms).

Run:  python bench/cli_startup_bench.py [--rounds 5]

Each round starts, alternately and in one run, fresh processes (the same interpreter as this
script, with ``-X frozen_modules=on`` left at its default):

- ``python -c pass``: the interpreter's own start-up, the floor;
- ``--version`` and ``--help`` of the console script (``todo_sessions._console:main``, as the
  installed ``todo-sessions`` runs it);
- ``--version`` with every module a command uses loaded first (``cli._load_the_library``):
  what start-up cost before the command line loaded the library lazily.

The table shows the MEDIAN wall-clock ms of each over the rounds with the spread (min-max),
never the best run. Target: ``--version`` and ``--help`` medians under 200 ms.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time

TARGET_MS = 200.0

CONSOLE = "import sys; sys.argv[0] = 'todo-sessions'; from todo_sessions._console import main; "
CASES: list[tuple[str, str, list[str]]] = [
    ("python -c pass (floor)", "pass", []),
    ("todo-sessions --version", CONSOLE + "main()", ["--version"]),
    ("todo-sessions --help", CONSOLE + "main()", ["--help"]),
    (
        "--version, library loaded (before)",
        CONSOLE + "import todo_sessions.cli as c; c._load_the_library(); main()",
        ["--version"],
    ),
]


def run_once(code: str, args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, *args], check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000


def main(rounds: int) -> None:
    print(f"python {platform.python_version()}, {platform.machine()}; {rounds} alternating rounds")
    print("median wall-clock ms per process start (min-max over rounds)\n")
    samples: dict[str, list[float]] = {label: [] for label, _, _ in CASES}
    for _label, code, args in CASES:  # warm the .pyc files and the page cache
        run_once(code, args)
    for number in range(rounds):
        order = CASES if number % 2 == 0 else CASES[::-1]
        for label, code, args in order:
            samples[label].append(run_once(code, args))
    print(f"{'command':<36} {'median':>8}  {'spread':>15}  target")
    for label, _, _ in CASES:
        got = samples[label]
        median = statistics.median(got)
        verdict = ""
        if label.startswith("todo-sessions"):
            verdict = "ok" if median < TARGET_MS else "OVER"
        spread = f"{min(got):.0f}-{max(got):.0f}"
        print(f"{label:<36} {median:8.0f}  {spread:>15}  {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    main(parser.parse_args().rounds)
