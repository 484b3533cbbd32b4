"""Mutation testing of the pure core, the todo tool and the live session (issue #17).

Run:  python bench/mutation.py [--module core/todos.py ...] [--sample N] [--seed S] [--list]
                               [--jobs 2] [--no-coverage] [--root DIR] [--verbose]
                               [--tests GLOB ...] [--min-score PCT] [--json FILE]

It makes small changes ("mutants") to one module at a time and runs the tests that import that
module; a mutant the tests do not notice ("survived") marks code whose behaviour no test pins.
Modules: todo_sessions/core/*.py, harness/tools/todo_write.py and _session.py (``--module``
picks some).
It prints killed/survived per module and each survivor's file, line and change; ``--json FILE``
writes the same as JSON, and ``--min-score 95`` makes the exit status 1 when a module scores
below 95% (the CI gate, tests/test_mutation_sample.py, runs a fixed ``--sample``/``--seed``).

Mutation operators (one change per mutant, written with the stdlib ``ast`` module):

- compare: ``<``/``<=``, ``>``/``>=``, ``==``/``!=``, ``is``/``is not``, ``in``/``not in`` flipped;
- boolop: ``and`` <-> ``or``;
- negate: the condition of ``if``/``elif``, ``while``, a ternary, ``assert`` becomes ``not (…)``;
- number: an int ``n`` becomes ``n + 1`` and ``n - 1`` (two mutants);
- bool: ``True`` <-> ``False``;
- string: a non-empty string (or f-string) becomes ``""``, an empty one ``"XX"``;
- call: an expression-statement call (``f(x)``, ``await f(x)``) becomes ``pass``;
- return: ``return x`` becomes ``return None``.

Not mutated: docstrings and other bare string statements, annotations, ``__all__`` and
``__slots__``, ``if TYPE_CHECKING:`` blocks, and the inside of f-strings.

Which tests judge a mutant:

1. Static: the test files that import its module (directly, through a package re-export such
   as ``from todo_sessions import Session``, or through a test helper such as
   ``tests/core/logs.py``). Tests marked ``slow`` are left out, and so is the PostgreSQL
   backend (``TODO_SESSIONS_PG_URL`` is unset for the runs). ``--tests GLOB`` (repeatable,
   matched against paths such as ``tests/core/test_todos.py``) keeps only the matching files.
2. Coverage: first every selected test file runs once unmutated, traced (coverage.py's C
   tracer, all threads), recording which test executes which line of the mutated modules. A
   mutant then runs only the tests that execute its lines (cheapest first); a mutant of a line
   no test executes survives without a run. A line that runs at import (module level, class bodies,
   decorators, default values) may change what any test sees, so its mutants run every test of
   the files. Tests that fail unmutated judge nothing (a warning names them). A test that never
   executes a line behaves the same with that line mutated, so leaving it out loses no kill:
   ``--no-coverage`` (every test of the files for every mutant; much slower) gives the same
   score.

Nothing is ever written into the working tree: each worker copies the repository (without
.git/.venv) to a temporary directory and mutates that copy, running pytest in a process forked
from a worker that has already imported pytest and the third-party libraries (so a mutant costs
its tests, not an interpreter start). Each run stops at the first failure (``-x -q -p
no:cacheprovider``) and is killed after 3x its tests' unmutated duration + 10 s (a timeout
counts as killed). Hypothesis runs derandomized, without a database or deadline, so scores
repeat from run to run.

Equivalent mutants (no test could tell them apart from the original) are listed once in
bench/mutation_equivalents.toml with the file, line, change and the reason; they are not run
and are excluded from the score. ``score = killed / (mutants - equivalent)``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import fnmatch
import json
import multiprocessing as mp
import os
import random
import select
import shutil
import signal
import sys
import tempfile
import time
import tomllib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
ROOT = HERE
"""The checkout to mutate (``--root``; default: the one holding this script)."""
PACKAGE = "todo_sessions"
EQUIVALENTS = Path(__file__).with_name("mutation_equivalents.toml")
COPY_IGNORE = shutil.ignore_patterns(
    *(".git", ".venv", "__pycache__", ".hypothesis", ".pytest_cache", ".mypy_cache", ".ruff_cache"),
    "node_modules",  # tests/acp_ts: the TypeScript SDK .ci/run installs
)
PYTEST_ARGS = [
    *("-x", "-q", "-p", "no:cacheprovider", "-m", "not slow", "-o", "addopts="),
    *("-W", "ignore::pytest.PytestAssertRewriteWarning"),  # plugins are imported before the run
]
HYPOTHESIS_PROFILE = "mutation"
LOCAL_DIRS = (PACKAGE, "tests", "bench")
"""Never preloaded: the children import these afresh from the copy."""


def default_modules() -> list[str]:
    core = sorted(
        f"core/{p.name}" for p in (ROOT / PACKAGE / "core").glob("*.py") if p.name != "__init__.py"
    )
    return [*core, "harness/tools/todo_write.py", "_session.py"]


# -- mutants ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Mutant:
    module: str
    """Path inside the package, e.g. ``core/todos.py``."""
    index: int
    line: int
    col: int
    end_line: int
    kind: str
    change: str
    start: int
    """Byte offsets of the replaced source span."""
    end: int
    replacement: str
    statement_line: int = 0
    """First line of the innermost statement holding the change (coverage: a multi-line
    statement reports line events for some of its lines only)."""

    @property
    def where(self) -> str:
        return f"{PACKAGE}/{self.module}:{self.line}"

    def apply(self, source: bytes) -> bytes:
        return source[: self.start] + self.replacement.encode() + source[self.end :]


_COMPARE_FLIP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}


def _short(node: ast.AST, limit: int = 70) -> str:
    text = ast.unparse(node).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Enumerator:
    """Walks a module's AST in a fixed order and records every mutation point."""

    def __init__(self, module: str, source: bytes) -> None:
        self.module = module
        self.source = source
        self.tree = ast.parse(source)
        self.line_starts = [0]
        for line in source.splitlines(keepends=True):
            self.line_starts.append(self.line_starts[-1] + len(line))
        self.mutants: list[Mutant] = []
        self.parents: dict[int, ast.AST] = {}

    def offset(self, line: int, col: int) -> int:
        return self.line_starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
            self.offset(node.end_lineno, node.end_col_offset),  # type: ignore[attr-defined]
        )

    def text(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.source[start:end].decode()

    def statement_line(self, node: ast.AST) -> int:
        line: int = node.lineno  # type: ignore[attr-defined]
        while not isinstance(node, ast.stmt) and id(node) in self.parents:
            node = self.parents[id(node)]
        return min(line, getattr(node, "lineno", line))

    def add(self, node: ast.AST, kind: str, change: str, replacement: str, at: ast.AST) -> None:
        start, end = self.span(node)
        self.mutants.append(
            Mutant(
                self.module,
                len(self.mutants),
                at.lineno,  # type: ignore[attr-defined]
                at.col_offset,  # type: ignore[attr-defined]
                max(node.end_lineno, at.end_lineno),  # type: ignore[attr-defined]
                kind,
                change,
                start,
                end,
                replacement,
                self.statement_line(at),
            )
        )

    # -- walking --------------------------------------------------------------------------------

    def run(self) -> list[Mutant]:
        self.parents = {
            id(child): node for node in ast.walk(self.tree) for child in ast.iter_child_nodes(node)
        }
        self.visit(self.tree)
        return self.mutants

    def visit(self, node: ast.AST) -> None:
        for child in self.children(node):
            self.visit(child)
        self.mutate(node)

    def children(self, node: ast.AST) -> Iterator[ast.AST]:
        """The sub-nodes to mutate (annotations, docstrings, ``__all__`` etc. left out)."""
        if isinstance(node, ast.JoinedStr):
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            return
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return  # docstrings and other bare strings
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id in {"__all__", "__slots__"} for t in targets):
                return
        for name, value in ast.iter_fields(node):
            if name in {"annotation", "returns"}:
                continue
            if isinstance(value, ast.AST):
                yield value
            elif isinstance(value, list):
                yield from (v for v in value if isinstance(v, ast.AST))

    def mutate(self, node: ast.AST) -> None:
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                flipped = _COMPARE_FLIP[type(op)]()
                new = ast.Compare(node.left, [*node.ops[:i], flipped, *node.ops[i + 1 :]])
                new.comparators = node.comparators
                after = ast.unparse(new)
                self.add(node, "compare", f"{_short(node)} → {_short(new)}", f"({after})", node)
        elif isinstance(node, ast.BoolOp):
            new = ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), node.values)
            self.add(
                node, "boolop", f"{_short(node)} → {_short(new)}", f"({ast.unparse(new)})", node
            )
        elif isinstance(node, ast.If | ast.While | ast.IfExp | ast.Assert):
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                return
            keyword = {ast.If: "if", ast.While: "while", ast.IfExp: "ternary", ast.Assert: "assert"}
            label = keyword[type(node)]
            self.add(
                node.test,
                "negate",
                f"{label} {_short(node.test)} → {label} not ({_short(node.test)})",
                f"(not ({self.text(node.test)}))",
                node.test,
            )
        elif isinstance(node, ast.Constant):
            self.mutate_constant(node)
        elif isinstance(node, ast.JoinedStr):
            self.add(node, "string", f"{_short(node)} → ''", "''", node)
        elif isinstance(node, ast.Expr) and (
            isinstance(node.value, ast.Call)
            or (isinstance(node.value, ast.Await) and isinstance(node.value.value, ast.Call))
        ):
            self.add(node, "call", f"{_short(node.value)} → pass", "pass", node)
        elif isinstance(node, ast.Return) and node.value is not None:
            value = node.value
            if isinstance(value, ast.Constant) and value.value is None:
                return
            self.add(value, "return", f"return {_short(value)} → return None", "None", node)

    def mutate_constant(self, node: ast.Constant) -> None:
        value = node.value
        parent = self.parents.get(id(node))
        name = f"{parent.arg}=" if isinstance(parent, ast.keyword) and parent.arg else ""
        if isinstance(value, bool):
            change = f"{name}{value} → {name}{not value}"
            self.add(node, "bool", change, repr(not value), node)
        elif isinstance(value, int):
            for new in (value + 1, value - 1):
                self.add(node, "number", f"{name}{value} → {name}{new}", f"({new})", node)
        elif isinstance(value, str):
            new = "" if value else "XX"
            self.add(node, "string", f"{name}{_short(node)} → {name}{new!r}", repr(new), node)


def enumerate_mutants(module: str, source: bytes | None = None) -> list[Mutant]:
    if source is None:
        source = (ROOT / PACKAGE / module).read_bytes()
    mutants = _Enumerator(module, source).run()
    for mutant in mutants:  # every mutant must at least compile
        compile(mutant.apply(source), mutant.module, "exec")
    return sorted(mutants, key=lambda m: (m.start, m.end, m.kind, m.change))


# -- equivalents --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Equivalent:
    """One ``[[equivalent]]`` entry: ``file``, ``line``, ``change`` (as ``--list`` prints it),
    ``reason``, and ``col`` when the same change occurs twice on the line."""

    file: str
    line: int
    change: str
    reason: str
    col: int | None = None

    def matches(self, mutant: Mutant) -> bool:
        return (
            self.file in {mutant.module, f"{PACKAGE}/{mutant.module}"}
            and self.line == mutant.line
            and self.change == mutant.change
            and self.col in {None, mutant.col}
        )


def load_equivalents(path: Path = EQUIVALENTS) -> list[Equivalent]:
    if not path.exists():
        return []
    data = tomllib.loads(path.read_text())
    return [
        Equivalent(e["file"], int(e["line"]), e["change"], e["reason"], e.get("col"))
        for e in data.get("equivalent", [])
    ]


# -- test selection -----------------------------------------------------------------------------


def _module_key(dotted: str) -> str | None:
    """``todo_sessions.core.todos`` -> ``core/todos.py`` (``tools`` -> ``tools/__init__.py``)."""
    parts = dotted.split(".")
    if parts[0] != PACKAGE:
        return None
    base = ROOT.joinpath(*parts)
    rel = "/".join(parts[1:])
    if base.with_suffix(".py").is_file():
        return f"{rel}.py"
    if (base / "__init__.py").is_file():
        return f"{rel}/__init__.py" if rel else "__init__.py"
    return None


def _reexports(package_key: str) -> dict[str, str]:
    """Names a package ``__init__`` imports from its submodules: name -> module key."""
    path = ROOT / PACKAGE / package_key
    pkg = package_key.rsplit("/", 1)[0] if "/" in package_key else ""
    dotted_pkg = ".".join([PACKAGE, *([pkg.replace("/", ".")] if pkg else [])])
    names: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            key = _module_key(f"{dotted_pkg}.{node.module}")
            if key is not None:
                for alias in node.names:
                    names[alias.asname or alias.name] = key
    return names


def _resolve_from(module: str, name: str) -> str | None:
    key = _module_key(f"{module}.{name}")
    if key is not None:
        return key
    key = _module_key(module)
    if key is None:
        return None
    seen = set()
    while key.endswith("__init__.py") and key not in seen:  # follow re-exports down
        seen.add(key)
        target = _reexports(key).get(name)
        if target is None:
            break
        key = target
    return key


def _imports(path: Path) -> tuple[set[str], set[str]]:
    """(package module keys, top-level names) imported anywhere in a file."""
    keys: set[str] = set()
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                key = _module_key(alias.name)
                if key is not None:
                    keys.add(key)
                names.add(alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == PACKAGE:
                for alias in node.names:
                    key = _resolve_from(node.module, alias.name)
                    if key is not None:
                        keys.add(key)
            names.add(node.module.split(".")[0])
    return keys, names


def select_tests(patterns: list[str] | None = None) -> dict[str, list[str]]:
    """Module key -> the test files (relative to the root) that import it (only those matching
    one of ``patterns``, fnmatch globs, when given)."""
    root = ROOT
    tests = root / "tests"
    helpers = {  # importable helper modules (pyproject's pythonpath: tests, tests/core)
        p.stem: p
        for d in (tests, tests / "core")
        for p in d.glob("*.py")
        if not p.name.startswith("test_") and p.name != "conftest.py"
    }
    direct: dict[Path, tuple[set[str], set[str]]] = {}
    files = sorted(p for p in tests.rglob("test_*.py"))
    for path in [*files, *helpers.values()]:
        direct[path] = _imports(path)

    def closure(path: Path, seen: set[Path]) -> set[str]:
        keys, names = direct[path]
        result = set(keys)
        for name in names:
            helper = helpers.get(name)
            if helper is not None and helper not in seen:
                seen.add(helper)
                result |= closure(helper, seen)
        return result

    selection: dict[str, list[str]] = defaultdict(list)
    for path in files:
        name = str(path.relative_to(root))
        if patterns and not any(fnmatch.fnmatchcase(name, p) for p in patterns):
            continue
        for key in closure(path, {path}):
            selection[key].append(name)
    return _through_importers(dict(selection))


def _package_imports(key: str) -> set[str]:
    """The package modules that module ``key`` imports (relative imports resolved)."""
    path = ROOT / PACKAGE / key
    parts = [PACKAGE, *key.removesuffix(".py").split("/")]
    package = parts[:-1]  # a module's package; an __init__'s is the package itself
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            for alias in node.names:
                target = _resolve_from(module, alias.name)
                if target is not None:
                    found.add(target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                target = _module_key(alias.name)
                if target is not None:
                    found.add(target)
    return found - {key}


def _through_importers(selection: dict[str, list[str]]) -> dict[str, list[str]]:
    """A module no test imports (a part split out of a module the tests know, such as
    ``core/envelope_checks.py`` of ``core/envelope.py``) is judged by the tests of the package
    modules that import it, the nearest that have tests; the coverage map then runs the tests
    that reach its lines."""
    keys = [
        str(p.relative_to(ROOT / PACKAGE))
        for p in (ROOT / PACKAGE).rglob("*.py")
        if "__pycache__" not in p.parts
    ]
    importers: dict[str, set[str]] = defaultdict(set)
    for key in keys:
        for target in _package_imports(key):
            importers[target].add(key)
    for key in keys:
        if selection.get(key):
            continue
        seen, level = {key}, set(importers.get(key, ()))
        while level:
            tests = sorted({t for k in level for t in selection.get(k, [])})
            if tests:
                selection[key] = tests
                break
            seen |= level
            level = {i for k in level for i in importers.get(k, ())} - seen
    return selection


def ordered_tests(module: str, tests: list[str]) -> list[str]:
    """The test file named after the module first (with -x it usually fails fastest)."""
    stem = Path(module).stem
    return sorted(tests, key=lambda t: (stem not in Path(t).stem, t))


# -- running ------------------------------------------------------------------------------------

RESULT_FILE = ".mutation-result.json"
"""Where a forked pytest run leaves what it reports (in the worker's copy)."""


class _Recorder:
    """A pytest plugin recording, per test, the lines of the mutated modules it executes.

    coverage.py's C tracer measures (a Python ``sys.settrace`` hook costs about 5x the tests'
    own time; the C tracer well under half of that), with the test id as its dynamic context.
    Lines executed outside any test (imports, collection) go under the test id ``""``. Threads
    started by the tests are measured too (coverage's default ``thread`` concurrency)."""

    def __init__(self, targets: dict[str, str]) -> None:
        self.targets = {os.path.realpath(file): module for file, module in targets.items()}
        """File name of a module in the copy (as coverage.py names it) -> its module key."""
        self.coverage: Any = None
        self.failed: list[str] = []
        self.durations: dict[str, float] = defaultdict(float)

    def start(self) -> None:
        import coverage

        self.coverage = coverage.Coverage(
            data_file=None, include=list(self.targets), config_file=False, branch=False
        )
        self.coverage.start()

    def stop(self) -> None:
        self.coverage.stop()

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.coverage.switch_context(nodeid)

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        self.coverage.switch_context("")

    def pytest_runtest_logreport(self, report: Any) -> None:
        self.durations[report.nodeid] += report.duration
        if report.failed:
            self.failed.append(report.nodeid)

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.failed.append(report.nodeid or "<collection>")

    def result(self) -> dict[str, Any]:
        data = self.coverage.get_data()
        found: dict[tuple[str, str], set[int]] = defaultdict(set)
        for file in data.measured_files():
            module = self.targets.get(file)
            if module is None:
                continue
            for line, contexts in data.contexts_by_lineno(file).items():
                for test in contexts:
                    found[(test, module)].add(line)
        lines: dict[str, dict[str, list[int]]] = defaultdict(dict)
        for (test, module), numbers in found.items():
            lines[test][module] = sorted(numbers)
        return {"lines": lines, "failed": self.failed, "durations": self.durations}


class _Select:
    """A pytest plugin keeping only the given test ids, in the given order (cheapest first).

    A mutant of a module-level value can rename parametrized tests (an id built from it): when a
    kept id is missing, the file's tests with ids the unmutated run never saw run too (but not
    the ``drop`` ones, which fail unmutated)."""

    def __init__(self, keep: list[str], drop: list[str]) -> None:
        self.keep = {test: rank for rank, test in enumerate(keep)}
        self.drop = set(drop)
        self.renamed: list[str] = []

    def pytest_collection_modifyitems(self, session: Any, config: Any, items: list[Any]) -> None:
        found = {item.nodeid for item in items}
        missing = {t.split("::")[0] for t in self.keep if t not in found}
        last = len(self.keep)
        for item in items:
            nodeid = item.nodeid
            if (
                nodeid not in self.keep
                and nodeid not in self.drop
                and nodeid.split("::")[0] in missing
            ):
                self.keep[nodeid] = last
                self.renamed.append(nodeid)
        deselected = [item for item in items if item.nodeid not in self.keep]
        items[:] = sorted(
            (item for item in items if item.nodeid in self.keep), key=lambda i: self.keep[i.nodeid]
        )
        if deselected:
            config.hook.pytest_deselected(items=deselected)

    def result(self) -> dict[str, Any]:
        return {"renamed": self.renamed}


def _child(copy: Path, args: list[str], plugin: Any, log: Path | None) -> None:
    """In the forked child: run pytest on the copy; never returns."""
    code = 70
    try:
        os.setpgid(0, 0)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        target = os.open(log if log else os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(target, 1)
        os.dup2(target, 2)
        sys.dont_write_bytecode = True
        import pytest
        from hypothesis import settings

        settings.load_profile(HYPOTHESIS_PROFILE)
        if isinstance(plugin, _Recorder):
            plugin.start()
        code = int(pytest.main(args, plugins=[plugin] if plugin is not None else []))
        if isinstance(plugin, _Recorder):
            plugin.stop()
        loaded = sys.modules.get(PACKAGE)
        if loaded is not None and not str(getattr(loaded, "__file__", "")).startswith(str(copy)):
            code = 71  # tested the working tree instead of the copy: refuse the result
        if plugin is not None:
            (copy / RESULT_FILE).write_text(json.dumps(plugin.result()))
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def _run_pytest(
    copy: Path, args: list[str], timeout: float, *, plugin: Any = None, log: Path | None = None
) -> tuple[int | None, float, dict[str, Any]]:
    """(pytest exit code, or None on timeout; seconds; what the plugin reported)."""
    result_file = copy / RESULT_FILE
    result_file.unlink(missing_ok=True)
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        _child(copy, args, plugin, log)
    code: int | None = None
    fd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        if ready:
            _, status = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(status)
    finally:
        os.close(fd)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # on timeout, and any stray grandchildren of this run
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    seconds = time.perf_counter() - started
    report = json.loads(result_file.read_text()) if result_file.exists() else {}
    return code, seconds, report


def _preload(modules: dict[str, str], copy: Path) -> None:
    """Import in the worker what the tests import, except this project and the test helpers."""
    import importlib

    local = tuple(str(p) for r in (copy, ROOT, HERE) for p in (r, *(r / d for d in LOCAL_DIRS)))
    local = tuple(p for p in local if p not in {str(ROOT), str(HERE)})
    for name, file in modules.items():  # in the order the collection imported them
        if name.split(".")[0] in {PACKAGE, "__main__", "__mp_main__", "conftest"}:
            continue
        if file.startswith(local):
            continue
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    loaded = sorted(n for n in sys.modules if n == PACKAGE or n.startswith(f"{PACKAGE}."))
    if loaded:  # the children must import every project module afresh from the copy
        raise RuntimeError(f"preloading imported {loaded}")


def _warm_up(copy: Path, tests: list[str]) -> dict[str, str]:
    """Collect ``tests`` once in a forked child, writing the bytecode of the unmutated copy and
    of the rewritten tests; returns the modules the collection imported (name -> file)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            sys.dont_write_bytecode = False
            import pytest

            pytest.main([*tests, "--collect-only", "-q", "-p", "no:cacheprovider"])
            modules = {
                name: getattr(module, "__file__", None) or ""
                for name, module in list(sys.modules.items())
                if isinstance(name, str)
            }
            (copy / RESULT_FILE).write_text(json.dumps(modules))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    modules: dict[str, str] = json.loads((copy / RESULT_FILE).read_text())
    return modules


@dataclass(slots=True)
class Task:
    kind: str  # "coverage" (one test file, traced) or "mutant"
    tests: list[str]
    """Test files to run."""
    keep: list[str] | None = None
    """Only these test ids (None: every test of the files)."""
    drop: list[str] = field(default_factory=list)
    """Ids that fail unmutated (never run)."""
    mutant: Mutant | None = None
    timeout: float = 600.0


@dataclass(slots=True)
class Outcome:
    task: Task
    status: str  # coverage: "passed"/"failed"; mutant: "killed"/"survived"/"timeout"/"error"
    seconds: float
    report: dict[str, Any] = field(default_factory=dict)
    detail: str = ""


def _copy_repository(target: Path) -> None:
    target.mkdir()
    for name in os.listdir(ROOT):
        if name.startswith("."):  # .git, .venv, caches
            continue
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=COPY_IGNORE)
        else:
            shutil.copy2(source, target / name)


def worker(copy: Path, warm: list[str], modules: list[str], tasks: Any, results: Any) -> None:
    """Serve tasks until a None arrives; runs in a forked process of its own."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the current run, then exit
    os.chdir(copy)
    sys.path.insert(0, str(copy))
    os.environ.pop("TODO_SESSIONS_PG_URL", None)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(copy), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"  # processes the tests start write no bytecode
    imported = _warm_up(copy, warm)
    import pytest  # noqa: F401  (loaded before forking: children start warm)
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        HYPOTHESIS_PROFILE,
        database=None,
        deadline=None,
        derandomize=True,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
    )
    _preload(imported, copy)
    targets = {str(copy / PACKAGE / m): m for m in modules}
    while True:
        task: Task | None = tasks.get()
        if task is None:
            return
        if task.mutant is None:  # a traced run of one test file, unmutated
            args = [*task.tests, *PYTEST_ARGS]
            args.remove("-x")
            log = copy / "coverage.log"
            code, seconds, report = _run_pytest(
                copy, args, task.timeout, plugin=_Recorder(targets), log=log
            )
            ok = code in (0, 5) and not report.get("failed")
            detail = "" if ok else log.read_text(errors="replace")[-4000:]
            results.put(Outcome(task, "passed" if ok else "failed", seconds, report, detail))
            continue
        mutant = task.mutant
        path = copy / PACKAGE / mutant.module
        original = path.read_bytes()
        for pyc in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
            pyc.unlink()  # the children then compile the mutated source (and write no bytecode)
        path.write_bytes(mutant.apply(original))
        try:
            plugin = _Select(task.keep, task.drop) if task.keep is not None else None
            code, seconds, report = _run_pytest(
                copy, [*task.tests, *PYTEST_ARGS], task.timeout, plugin=plugin
            )
        finally:
            path.write_bytes(original)
        if code == 71:
            status = "error"
        elif code is None:
            status = "timeout"
        elif code == 0:
            status = "survived"
        else:
            status = "killed"
        results.put(Outcome(task, status, seconds, report, f"exit code {code}"))


# -- coverage -----------------------------------------------------------------------------------


@dataclass(slots=True)
class Coverage:
    """Which tests execute which lines, from the traced runs of the unmutated copy."""

    tests: dict[str, dict[int, set[str]]] = field(default_factory=dict)
    """module -> line -> ids of the tests executing it."""
    imports: dict[str, set[int]] = field(default_factory=dict)
    """module -> lines executed outside any test (module level, at import)."""
    durations: dict[str, float] = field(default_factory=dict)
    """test id -> seconds."""
    failed: set[str] = field(default_factory=set)
    """Ids of the tests (or files) that fail unmutated: they judge no mutant."""

    def add(self, outcome: Outcome) -> None:
        self.durations.update(outcome.report.get("durations", {}))
        self.failed.update(outcome.report.get("failed", []))
        if outcome.status != "passed" and not outcome.report.get("failed"):
            self.failed.update(outcome.task.tests)  # crashed or timed out: drop the whole file
        for test, modules in outcome.report.get("lines", {}).items():
            for module, lines in modules.items():
                if test == "":
                    self.imports.setdefault(module, set()).update(lines)
                else:
                    by_line = self.tests.setdefault(module, {})
                    for line in lines:
                        by_line.setdefault(line, set()).add(test)


@dataclass(slots=True)
class Plan:
    """What to run for one mutant."""

    files: list[str]
    keep: list[str]
    drop: list[str]
    timeout: float


def plan_for(
    mutant: Mutant, files: list[str], coverage: Coverage, *, narrow: bool = True
) -> Plan | None:
    """The tests to run for a mutant, cheapest first (None: no test executes its lines).

    A mutant of a line that runs at import (module level, class bodies, decorators, default
    values) can change what any test of the files sees: those run every passing test."""
    ordered = ordered_tests(mutant.module, files)
    rank = {f: i for i, f in enumerate(ordered)}
    failed = coverage.failed
    passing = {
        t
        for t in coverage.durations
        if t.split("::")[0] in rank and t not in failed and t.split("::")[0] not in failed
    }
    lines = range(mutant.statement_line or mutant.line, mutant.end_line + 1)
    at_import = any(line in coverage.imports.get(mutant.module, ()) for line in lines)
    if narrow and not at_import:
        by_line = coverage.tests.get(mutant.module, {})
        passing &= {t for line in lines for t in by_line.get(line, ())}
    if not passing:
        return None
    keep = sorted(passing, key=lambda t: (rank[t.split("::")[0]], coverage.durations[t], t))
    used = {t.split("::")[0] for t in keep}
    drop = sorted(t for t in failed if t.split("::")[0] in used)
    seconds = sum(coverage.durations[t] for t in keep)
    return Plan([f for f in ordered if f in used], keep, drop, 3 * seconds + 10)


# -- reporting ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Tally:
    mutants: int = 0
    killed: int = 0
    survived: int = 0
    equivalent: int = 0
    survivors: list[tuple[Mutant, str]] = field(default_factory=list)
    timeouts: list[Mutant] = field(default_factory=list)
    """Killed by the time limit, not by a failing test (listed: a loaded machine can time out
    a run that would have passed)."""

    @property
    def score(self) -> float | None:
        run = self.killed + self.survived
        return self.killed / run if run else None


def print_table(tallies: dict[str, Tally]) -> None:
    columns = ("mutants", "killed", "survived", "equivalent", "score")
    head = f"{'module':<24} " + " ".join(f"{c:>10}" for c in columns)
    print(head)
    print("-" * len(head))
    total = Tally()
    for module, t in [*tallies.items(), ("total", total)]:
        if t is total:
            print("-" * len(head))
        score = "-" if t.score is None else f"{100 * t.score:.1f}%"
        cells = (t.mutants, t.killed, t.survived, t.equivalent, score)
        print(f"{module:<24} " + " ".join(f"{c:>10}" for c in cells))
        if t is not total:
            total.mutants += t.mutants
            total.killed += t.killed
            total.survived += t.survived
            total.equivalent += t.equivalent


def sample_mutants(mutants: list[Mutant], size: int, seed: int) -> list[Mutant]:
    """About ``size`` of the mutants, drawn with ``seed``: each module gets its share in
    proportion to its number of mutants, and at least one."""
    by_module: dict[str, list[Mutant]] = defaultdict(list)
    for mutant in mutants:
        by_module[mutant.module].append(mutant)
    rng = random.Random(seed)
    chosen: list[Mutant] = []
    for found in by_module.values():
        share = max(1, round(size * len(found) / len(mutants)))
        chosen += rng.sample(found, min(share, len(found)))
    return chosen


def write_json(path: Path, tallies: dict[str, Tally], meta: dict[str, Any]) -> None:
    """The table as JSON: per module its counts, score (a fraction, or null) and survivors."""
    modules = {
        module: {
            "mutants": t.mutants,
            "killed": t.killed,
            "survived": t.survived,
            "equivalent": t.equivalent,
            "timeouts": len(t.timeouts),
            "score": t.score,
            "survivors": [
                {"line": m.line, "col": m.col, "kind": m.kind, "change": m.change, "note": note}
                for m, note in sorted(t.survivors, key=lambda s: s[0].start)
            ],
        }
        for module, t in tallies.items()
    }
    path.write_text(json.dumps({**meta, "modules": modules}, indent=2, ensure_ascii=False) + "\n")


def _normalise(module: str) -> str:
    module = module.removeprefix("./").removeprefix(f"{PACKAGE}/")
    if not (ROOT / PACKAGE / module).is_file():
        raise SystemExit(f"no such module: {PACKAGE}/{module}")
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--module",
        action="append",
        help="a module to mutate, e.g. core/todos.py (repeatable; default: all)",
    )
    parser.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="run a random sample of about N mutants (each module its share, at least one)",
    )
    parser.add_argument("--seed", type=int, default=17, help="seed of --sample (default 17)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument(
        "--no-coverage",
        action="store_true",
        help="run every test of the selected files for each mutant (slow; default: only the "
        "tests that execute the mutated lines)",
    )
    parser.add_argument("--verbose", "-v", action="store_true", help="print every mutant's fate")
    parser.add_argument(
        "--root", type=Path, help="mutate this checkout instead (its tests and package)"
    )
    parser.add_argument(
        "--tests",
        action="append",
        metavar="GLOB",
        help="judge with only the test files matching GLOB, e.g. 'tests/core/*' (repeatable)",
    )
    parser.add_argument(
        "--min-score",
        type=float,
        metavar="PCT",
        help="exit with status 1 if a module's score is below PCT percent",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the table as JSON")
    args = parser.parse_args(argv)
    if args.root is not None:
        global ROOT
        ROOT = args.root.resolve()
    started = time.perf_counter()

    modules = [_normalise(m) for m in args.module] if args.module else default_modules()
    equivalents = load_equivalents()
    selection = select_tests(args.tests)
    mutants: dict[str, list[Mutant]] = {m: enumerate_mutants(m) for m in modules}
    tallies = {m: Tally() for m in modules}
    todo: list[Mutant] = []
    used: set[Equivalent] = set()
    for module, found in mutants.items():
        for mutant in found:
            match = next((e for e in equivalents if e.matches(mutant)), None)
            tallies[module].mutants += 1
            if match is not None:
                used.add(match)
                tallies[module].equivalent += 1
            else:
                todo.append(mutant)
    stale = [e for e in equivalents if e not in used and _normalise(e.file) in modules]
    if args.list:
        for module, found in mutants.items():
            tests = selection.get(module, [])
            print(f"# {PACKAGE}/{module}: {len(found)} mutants; tests: {' '.join(tests) or '-'}")
            for m in found:
                eq = "  (equivalent)" if any(e.matches(m) for e in equivalents) else ""
                print(f"{m.where}:{m.col} [{m.kind}] {m.change}{eq}")
        print(f"{sum(len(f) for f in mutants.values())} mutants, {len(used)} equivalent")
        for e in stale:
            print(f"stale equivalent (no such mutant): {e.file}:{e.line} {e.change}")
        return 0
    if args.sample is not None and args.sample < len(todo):
        todo = sample_mutants(todo, args.sample, args.seed)
        for module, t in tallies.items():
            t.mutants, t.equivalent = sum(m.module == module for m in todo), 0

    def survived(m: Mutant, note: str = "") -> None:
        tallies[m.module].survived += 1
        tallies[m.module].survivors.append((m, note))

    for m in [m for m in todo if not selection.get(m.module)]:
        survived(m, "no test imports this module")
    todo = [m for m in todo if selection.get(m.module)]
    needed = sorted({m.module for m in todo})
    files = sorted({f for module in needed for f in selection[module]})

    ctx = mp.get_context("fork")
    tasks: Any = ctx.Queue()
    results: Any = ctx.Queue()
    tmp = Path(tempfile.mkdtemp(prefix="mutation-"))
    workers = []
    finished = False
    try:
        for i in range(max(1, args.jobs)):
            copy = tmp / f"w{i}"
            _copy_repository(copy)
            proc = ctx.Process(target=worker, args=(copy, files, needed, tasks, results))
            proc.start()
            workers.append(proc)

        # 1. each test file once, unmutated and traced: it must pass; which test runs which line
        coverage = Coverage()
        for f in sorted(files, key=lambda f: -(ROOT / f).stat().st_size):  # long ones first
            tasks.put(Task("coverage", [f]))
        for _ in files:
            outcome: Outcome = results.get()
            coverage.add(outcome)
            if outcome.status != "passed" and args.verbose:
                print(outcome.detail, file=sys.stderr)
        print(
            f"unmutated: {len(files)} test files, {len(coverage.durations)} tests, "
            f"{time.perf_counter() - started:.0f}s",
            flush=True,
        )
        if coverage.failed:
            print(
                f"warning: {len(coverage.failed)} tests or files fail unmutated and judge no "
                f"mutant (-v shows why): {', '.join(sorted(coverage.failed)[:5])}"
                + (", ..." if len(coverage.failed) > 5 else ""),
                file=sys.stderr,
                flush=True,
            )

        # 2. the mutants (the longest runs first, so the two workers finish together)
        plans: list[tuple[Mutant, Plan]] = []
        for m in todo:
            plan = plan_for(m, selection[m.module], coverage, narrow=not args.no_coverage)
            if plan is None:
                survived(m, "no test executes this line")
            else:
                plans.append((m, plan))
        plans.sort(key=lambda mp_: (-mp_[1].timeout, mp_[0].module, mp_[0].start))
        for m, plan in plans:
            tasks.put(Task("mutant", plan.files, plan.keep, plan.drop, m, plan.timeout))
        for done in range(1, len(plans) + 1):
            outcome = results.get()
            m = outcome.task.mutant
            assert m is not None
            if outcome.status == "error":
                raise SystemExit(f"a mutant run went wrong ({outcome.report}): {m.where}")
            if outcome.status == "survived":
                survived(m)
            else:
                tallies[m.module].killed += 1
                if outcome.status == "timeout":
                    tallies[m.module].timeouts.append(m)
            if args.verbose or outcome.status in ("survived", "timeout"):
                print(
                    f"[{done}/{len(plans)}] {outcome.status:<8} {m.where}:{m.col} {m.change} "
                    f"({outcome.seconds:.1f}s, {len(outcome.task.keep or ())} tests)",
                    flush=True,
                )
        finished = True
    finally:
        for proc in workers:
            if finished:
                tasks.put(None)
            else:  # interrupted: each worker kills its current run and exits
                proc.terminate()
        if not finished:
            tasks.cancel_join_thread()  # drop the tasks nobody will read
        for proc in workers:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)

    print()
    print_table(tallies)
    survivors = [s for t in tallies.values() for s in sorted(t.survivors, key=lambda s: s[0].start)]
    if survivors:
        print(f"\n{len(survivors)} survivors:")
        for m, note in survivors:
            print(f"  {m.where}: [{m.kind}] {m.change}" + (f"  ({note})" if note else ""))
    timeouts = [m for t in tallies.values() for m in sorted(t.timeouts, key=lambda m: m.start)]
    if timeouts:
        print(f"\n{len(timeouts)} killed by the time limit (not by a test; re-run if loaded):")
        for m in timeouts:
            print(f"  {m.where}: [{m.kind}] {m.change}")
    for e in stale:
        print(f"stale equivalent (no such mutant now): {e.file}:{e.line} {e.change}")
    sample = f" (a sample, seed {args.seed})" if args.sample is not None else ""
    elapsed = time.perf_counter() - started
    print(f"\n{len(todo)} mutants{sample} on {args.jobs} workers in {elapsed:.0f}s")
    if args.json is not None:
        meta = {"argv": sys.argv[1:] if argv is None else argv, "seconds": round(elapsed, 1)}
        write_json(args.json, tallies, meta)
    if args.min_score is not None:
        low = [
            f"{module} {100 * t.score:.1f}%"
            for module, t in tallies.items()
            if t.score is not None and 100 * t.score < args.min_score
        ]
        if low:
            print(f"below {args.min_score:g}%: {', '.join(low)}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
