"""The store's import graph: no cycle inside ``todo_sessions/store/``, and the database
drivers imported only by their backend modules (and the URL parser)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "todo_sessions"
STORE = PACKAGE / "store"
DRIVERS = frozenset({"sqlite3", "asyncpg", "aiosqlite", "psycopg", "psycopg2"})
DRIVER_MODULES = (
    "store/sqlite/",
    "store/postgres/",
    "store/engine.py",
    "store/connecting.py",
    "importers/_opencode_read.py",
    "importers/opencode.py",
)
"""The backend packages, the URL parser and asyncpg's connect helper; and the opencode importer
(its reader and its errors), which opens opencode's own database (another program's file,
read-only), never ours."""


def _imports(path: Path) -> list[tuple[str, int]]:
    """Absolute names of every module ``path`` imports (also inside functions and
    ``TYPE_CHECKING`` blocks), with the relative level resolved."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                name = f"{base}.{node.module}" if node.module else base
                if not node.module:  # ``from . import x``: each x is a module of the package
                    found += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
                    continue
            else:
                name = node.module or ""
            found.append((name, node.lineno))
    return found


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _store_graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in STORE.rglob("*.py") if "__pycache__" not in p.parts}
    return {
        name: {imported for imported, _ in _imports(path) if imported in modules} - {name}
        for name, path in modules.items()
    }


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (as a path that comes back to its start), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_store_has_no_import_cycle() -> None:
    graph = _store_graph()
    assert "todo_sessions.store.recorder" in graph and len(graph) >= 15
    assert graph["todo_sessions.store.backends"] >= {
        "todo_sessions.store.sqlite",
        "todo_sessions.store.postgres",
    }
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_recorder_contract_imports_nothing_at_run_time() -> None:
    """``store/recorder.py`` is the contract and nothing else: its store imports are for type
    checking only, and it picks no backend."""
    tree = ast.parse((STORE / "recorder.py").read_text())
    runtime = [
        node for node in tree.body if isinstance(node, ast.ImportFrom) and node.level
    ]  # top-level relative imports run at import time; the TYPE_CHECKING block does not
    assert runtime == []


def test_drivers_are_imported_only_by_their_backends() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        for name, line in _imports(path):
            if name.split(".")[0] in DRIVERS and not where.startswith(DRIVER_MODULES):
                offenders.append(f"{where}:{line} imports {name}")
    assert offenders == []


HATCH_OWNERS = ("todo_sessions/store/sqlite/", "todo_sessions/store/postgres/")
"""The backend packages: the only code that may call a recorder's ``run_maintenance`` (an
arbitrary function on the store's own connection; ``run_locked``, the migrations' hatch, is
not this)."""


def _hatch_uses(source: str) -> list[int]:
    """Lines of ``source`` that name ``run_maintenance`` (a call, an attribute, an import) or
    import the removed ``todo_sessions.store.maintenance``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        named = (
            (isinstance(node, ast.Attribute) and node.attr == "run_maintenance")
            or (isinstance(node, ast.Name) and node.id == "run_maintenance")
            or (
                isinstance(node, ast.ImportFrom)
                and (
                    any(alias.name in ("run_maintenance", "maintenance") for alias in node.names)
                    or (node.module or "").endswith("store.maintenance")
                )
            )
        )
        if named:
            found.append(node.lineno)
    return found


def test_nothing_outside_the_backends_runs_the_maintenance_hatch() -> None:
    """Outside ``store/sqlite/`` and ``store/postgres/`` nothing runs a function on a store's
    connection: the store calls the recorder's named operations, and tests use the public API,
    those operations, or a raw connection of their own (``factories.raw_sql``)."""
    root = PACKAGE.parent
    offenders = []
    for top in ("todo_sessions", "tests", "bench"):
        for path in sorted((root / top).rglob("*.py")):
            where = path.relative_to(root).as_posix()
            if "__pycache__" in path.parts or where.startswith(HATCH_OWNERS):
                continue
            offenders += [f"{where}:{line}" for line in _hatch_uses(path.read_text())]
    assert offenders == []


def test_the_hatch_finder_finds_each_form() -> None:
    uses = [
        "from todo_sessions.store.maintenance import run_maintenance",
        "from todo_sessions.store import maintenance",
        "await recorder.run_maintenance(fn, write=True)",
        "await run_maintenance(store, fn)",
    ]
    assert [_hatch_uses(source) for source in uses] == [[1], [1], [1], [1]]
    assert _hatch_uses("await recorder.run_locked(fn)\nraw_sql(store, fn)") == []
