"""Writes the blocking API's methods from the async classes: ``python -m todo_sessions._gen_sync``.

`SyncSessionStore` and `SyncSessionService` (`todo_sessions.sync`) get one real method per
public member of `SessionStore` and `SessionService`, written into `_sync_store.py` and
`_sync_service.py` with the async member's name, parameters, defaults, annotations and
docstring, so that a type checker sees them as it sees the async ones. Each is one call into
the private loop thread (`_sync_thread._LoopThread`): a coroutine method is awaited there, an
async iterator becomes a blocking iterator, an async context manager a blocking one, a plain
method runs there, a property reads through.

Run it after changing a public member of either async class (``--check``: exit 1, writing
nothing, when a file is not what it would write). Nothing imports this module at run time.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import importlib
import importlib.util
import inspect
import io
import re
import sys
import tokenize
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

_WIDTH = 100
_LIVE_ITERATORS = frozenset({"follow"})  # async iterators that wait for what comes next
_ASYNC_ITERATOR = re.compile(r"(?:typing\.|collections\.abc\.)?Async(?:Iterator|Generator)\[(.*)\]")
_ASYNC_MANAGER = re.compile(
    r"(?:typing\.|contextlib\.)?(?:Abstract)?AsyncContextManager\[(.*)\]", re.DOTALL
)
# What the generated module binds itself, and where from.
_OWN_IMPORTS = {
    "Iterator": ("collections.abc", "Iterator"),
    "AbstractContextManager": ("contextlib", "AbstractContextManager"),
    "_LoopThread": ("todo_sessions._sync_thread", "_LoopThread"),
    "_BATCH": ("todo_sessions._sync_thread", "_BATCH"),
    "_LIVE": ("todo_sessions._sync_thread", "_LIVE"),
    "_now": ("todo_sessions._sync_thread", "_now"),
}


@dataclass(frozen=True)
class Spec:
    """One generated module: the twins of ``async_cls``'s public members, as methods of the
    class ``name``, calling the async object held in ``self.<owner>``."""

    async_cls: type
    name: str
    owner: str
    file: str
    # Members the sync class writes by hand (name -> why), not generated.
    by_hand: dict[str, str] = field(default_factory=dict)
    # Members of other classes to twin too: name -> (class, expression of the object on self).
    also: dict[str, tuple[type, str]] = field(default_factory=dict)


def specs() -> tuple[Spec, ...]:
    """The generated modules of the package."""
    from ._service import SessionService
    from .store.store import SessionStore

    return (
        Spec(
            SessionStore,
            "_SyncSessionStoreMethods",
            "_store",
            "_sync_store.py",
            by_hand={"open": "the constructor opens the store", "aclose": "`close`"},
        ),
        Spec(
            SessionService,
            "_SyncSessionServiceMethods",
            "_service",
            "_sync_service.py",
            by_hand={
                "aclose": "`close` without a session id",
                "close": "without a session id it closes the whole service",
                "checkpoint_for": "gives a blocking callback",
            },
            also={"follow": (SessionStore, "_service.store")},
        ),
    )


# -- one member ------------------------------------------------------------------------------


@dataclass
class _Member:
    name: str
    member: Any  # the function or property as defined
    target: str  # the async object's expression on self, e.g. "_store"
    owner_name: str  # the async class's name, e.g. "SessionStore"

    @property
    def function(self) -> Any:
        return self.member.fget if isinstance(self.member, property) else self.member


def _members(spec: Spec) -> list[_Member]:
    found = [
        _Member(name, member, spec.owner, spec.async_cls.__name__)
        for name, member in _public_members(spec.async_cls).items()
        if name not in spec.by_hand
    ]
    for name, (other, target) in spec.also.items():
        found.append(_Member(name, _public_members(other)[name], target, other.__name__))
    # A member named like a builtin (`list`) hides it from the annotations of the members after
    # it in the class body, as type checkers read it: those come last.
    return sorted(found, key=lambda m: (hasattr(builtins, m.name), m.name))


def _public_members(cls: type) -> dict[str, Any]:
    """The public methods (plain, coroutine, async generator) and properties of ``cls`` and its
    bases, as defined (not bound)."""
    members = {name: inspect.getattr_static(cls, name) for name in dir(cls) if name[0] != "_"}
    return {n: m for n, m in members.items() if isinstance(m, property) or inspect.isfunction(m)}


def _annotation(value: Any, where: str) -> str:
    """An annotation as written, its strings in double quotes as the formatter writes them."""
    if not isinstance(value, str):
        raise TypeError(
            f"{where}: annotations must be strings (from __future__ import annotations)"
        )
    tokens = list(tokenize.generate_tokens(io.StringIO(value).readline))
    for i, token in enumerate(tokens):
        text = token.string
        if token.type == tokenize.STRING and text[0] == "'" and not set('"\\') & set(text):
            tokens[i] = token._replace(string=f'"{text[1:-1]}"')
    return tokenize.untokenize(tokens).strip()


def _literal(value: Any, where: str) -> str:
    """A default value as source, as the formatter writes it."""
    if value is Ellipsis:
        return "..."
    if isinstance(value, str):
        if '"' in value or "\\" in value or "\n" in value:
            raise ValueError(f"{where}: write this string default by hand")
        return f'"{value}"'
    if isinstance(value, tuple):
        inner = ", ".join(_literal(v, where) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    raise ValueError(f"{where}: default {value!r} has no literal form")


def _parameters(signature: inspect.Signature, where: str) -> tuple[list[str], list[str]]:
    """The parameters as written in a def, and the arguments that pass them on."""
    params: list[str] = []
    args: list[str] = []
    kinds = [p.kind for p in signature.parameters.values()]
    positional_only = [p.name for p in signature.parameters.values() if p.kind is p.POSITIONAL_ONLY]
    for param in signature.parameters.values():
        if (
            param.kind is param.KEYWORD_ONLY
            and param.VAR_POSITIONAL not in kinds
            and "*" not in params
        ):
            params.append("*")
        text = param.name
        if param.annotation is not param.empty:
            text += f": {_annotation(param.annotation, where)}"
        if param.default is not param.empty:
            default = _literal(param.default, where)
            text += f" = {default}" if param.annotation is not param.empty else f"={default}"
        if param.kind is param.VAR_POSITIONAL:
            text, arg = "*" + text, "*" + param.name
        elif param.kind is param.VAR_KEYWORD:
            text, arg = "**" + text, "**" + param.name
        elif param.kind is param.KEYWORD_ONLY:
            arg = f"{param.name}={param.name}"
        else:
            arg = param.name
        params.append(text)
        if param.name != "self":
            args.append(arg)
        if positional_only and param.name == positional_only[-1]:
            params.append("/")
    return params, args


def _kind(function: Any, returns: str) -> str:
    if inspect.iscoroutinefunction(function):
        return "coroutine"
    if inspect.isasyncgenfunction(function):
        return "iterator"
    if _ASYNC_MANAGER.fullmatch(returns) or inspect.isasyncgenfunction(
        getattr(function, "__wrapped__", None)
    ):
        return "manager"
    if _ASYNC_ITERATOR.fullmatch(returns):
        raise TypeError(f"{function.__qualname__} returns an async iterator: make it `async def`")
    return "plain"


def _blocking_return(kind: str, returns: str, where: str) -> str:
    if kind not in ("iterator", "manager"):
        return returns
    # An `asynccontextmanager` function is annotated as the async iterator it is written as.
    match = _ASYNC_MANAGER.fullmatch(returns) if kind == "manager" else None
    match = match or _ASYNC_ITERATOR.fullmatch(returns)
    if match is None:
        raise TypeError(f"{where}: return annotation {returns!r} is not an async iterator/manager")
    item = _first_argument(returns, where)  # AsyncGenerator[X, None] yields X too
    return f"Iterator[{item}]" if kind == "iterator" else f"AbstractContextManager[{item}]"


def _first_argument(annotation: str, where: str) -> str:
    """The ``X`` of ``Name[X, ...]``."""
    node = ast.parse(annotation, mode="eval").body
    assert isinstance(node, ast.Subscript), annotation
    first = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) else node.slice
    return _annotation(ast.unparse(first), where)


def _docstring(member: _Member, indent: str) -> list[str]:
    blocking = "" if isinstance(member.member, property) else ", blocking"
    raw = member.function.__doc__ or f"`{member.owner_name}.{member.name}`{blocking}."
    lines = inspect.cleandoc(raw).split("\n")
    if any('"""' in line or "\\" in line for line in lines):
        raise ValueError(f"{member.name}: its docstring needs escaping; write it by hand")
    out = [f'{indent}"""{lines[0]}']
    out += [f"{indent}{line}" if line else "" for line in lines[1:]]
    if len(lines) > 1 and raw.rstrip(" \t").endswith("\n"):
        out.append(f'{indent}"""')
    else:
        out[-1] += '"""'
    return out


def _method(member: _Member) -> tuple[list[str], list[str]]:
    """The source of one twin (at class indentation), and the expressions whose names it
    needs bound (its annotations, the helpers it calls)."""
    where = f"{member.function.__qualname__}"
    function = member.function
    returns = _annotation(function.__annotations__.get("return", "None"), where)
    target = f"self.{member.target}"
    if isinstance(member.member, property):
        lines = ["    @property", f"    def {member.name}(self) -> {returns}:"]
        lines += _docstring(member, " " * 8)
        lines.append(f"        return {target}.{member.name}")
        return lines, [returns]
    signature = inspect.signature(function)
    params, args = _parameters(signature, where)
    kind = _kind(function, returns)
    blocking = _blocking_return(kind, returns, where)
    lines = _bracketed(f"    def {member.name}(", params, f") -> {blocking}:", "    ")
    lines += _docstring(member, " " * 8)
    lines += _body(kind, member.name, target, args)
    written = [
        _annotation(p.annotation, where)
        for p in signature.parameters.values()
        if p.annotation is not p.empty
    ]
    helper = {"plain": "_now", "iterator": _batch(member.name)}.get(kind, "_LoopThread")
    return lines, [*written, blocking, helper]


def _batch(name: str) -> str:
    return "_LIVE" if name in _LIVE_ITERATORS else "_BATCH"


def _body(kind: str, name: str, target: str, args: list[str]) -> list[str]:
    indent = " " * 8
    if kind == "plain":
        head, items, tail = "_now(", [f"{target}.{name}", *args], ")"
    else:
        head, items, tail = f"{target}.{name}(", args, ")"
    wrap = {
        "coroutine": ("self._thread.call(", ")"),
        "plain": ("self._thread.call(", ")"),
        "iterator": ("self._thread.iterate(", f", {_batch(name)})"),
        "manager": ("self._thread.enter(", ")"),
    }[kind]
    line = f"{indent}return {wrap[0]}{head}{', '.join(items)}{tail}{wrap[1]}"
    if len(line) <= _WIDTH:
        return [line]
    variable = {"iterator": "items", "manager": "manager"}.get(kind, "awaitable")
    lines = _bracketed(f"{indent}{variable} = {head}", items, tail, indent)
    return [*lines, f"{indent}return {wrap[0]}{variable}{wrap[1]}"]


def _bracketed(head: str, items: list[str], tail: str, indent: str) -> list[str]:
    """``head + items + tail`` as the formatter writes it: one line, or the items on one line
    of their own, or one item a line with a trailing comma."""
    one = f"{head}{', '.join(items)}{tail}"
    if len(one) <= _WIDTH or not items:
        return [one]
    inner = f"{indent}    {', '.join(items)}"
    if len(inner) <= _WIDTH and not head.lstrip().startswith("from "):
        return [head, inner, f"{indent}{tail}"]
    return [head, *(f"{indent}    {item}," for item in items), f"{indent}{tail}"]


# -- the imports the annotations need ----------------------------------------------------------


@dataclass(frozen=True)
class _Import:
    module: str  # absolute
    name: str | None  # None: ``import module``
    alias: str | None = None


@cache
def _bindings(module_name: str) -> dict[str, _Import]:
    """What each top-level name of a module is bound to, from its source: its imports and its
    own definitions (not what it imports only for type checkers)."""
    module = sys.modules[module_name]
    tree = ast.parse(inspect.getsource(module))
    package = module_name if hasattr(module, "__path__") else module_name.rpartition(".")[0]
    found: dict[str, _Import] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.partition(".")[0]
                found[bound] = _Import(alias.name, None, alias.asname)  # binds its first part
        elif isinstance(node, ast.ImportFrom):
            source = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            for alias in node.names:
                bound = alias.asname or alias.name
                found[bound] = _Import(source, alias.name, alias.asname)
        else:
            for bound in _defined(node):
                found[bound] = _Import(module_name, bound)
    return found


def _defined(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        return [node.name]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    return []


def _names(annotation: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(annotation, mode="eval")) if isinstance(n, ast.Name)}


def _imports(members: list[tuple[_Member, list[str]]], spec: Spec) -> dict[str, _Import]:
    """Each name the annotations use (and the class's own), with the import that binds it."""
    used = set().union(*(_names(a) for _, written in members for a in written))
    wanted: dict[str, _Import] = {
        name: _Import(module, attr)
        for name, (module, attr) in _OWN_IMPORTS.items()
        if name in used or name == "_LoopThread"  # the class annotates its _thread
    }
    wanted[spec.async_cls.__name__] = _Import(spec.async_cls.__module__, spec.async_cls.__name__)
    hidden: set[str] = set()  # builtins hidden by a member defined above
    for member, needs in members:
        for name in sorted(set().union(*map(_names, needs))):
            if name in hidden:
                raise NameError(f"{member.name}: {name} is a method above it in the class")
            _bind(wanted, name, member)
        if hasattr(builtins, member.name):
            hidden.add(member.name)
    return wanted


def _bind(wanted: dict[str, _Import], name: str, member: _Member) -> None:
    """Add the import of ``name`` as ``member``'s module binds it to ``wanted``."""
    module = member.function.__module__
    binding = _bindings(module).get(name)
    if name in wanted:
        _same_object(name, wanted[name], binding, member.name)
    elif binding is not None:
        wanted[name] = binding
    elif not hasattr(builtins, name):
        raise NameError(f"{member.name}: no binding of {name} in {module}")


def _same_object(name: str, have: _Import, other: _Import | None, where: str) -> None:
    if other is None or other == have:
        return
    if _resolve(other) is not _resolve(have):
        raise NameError(f"{where}: {name} means two things in the async classes' modules")


def _resolve(binding: _Import) -> Any:
    module = importlib.import_module(binding.module)
    return module if binding.name is None else getattr(module, binding.name)


def _import_lines(imports: dict[str, _Import], package: str) -> list[str]:
    """The import statements, grouped and sorted as the linter sorts them."""
    sections: dict[int, dict[str, list[str]]] = {}
    for bound, binding in sorted(imports.items()):
        top = binding.module.partition(".")[0]
        section = 3 if top == package else 1 if top in sys.stdlib_module_names else 2
        if binding.name is None:
            alias = f" as {binding.alias}" if binding.alias else ""
            sections.setdefault(section, {})[f"import {binding.module}{alias}"] = []
            continue
        module = binding.module
        if section == 3:
            module = "." + module.removeprefix(package).lstrip(".") if module != package else "."
        name = f"{binding.name} as {bound}" if binding.name != bound else bound
        sections.setdefault(section, {}).setdefault(f"from {module} import", []).append(name)
    lines = ["from __future__ import annotations"]
    for section in sorted(sections):
        lines.append("")
        statements = sections[section]
        for statement in sorted(statements, key=_statement_key):
            names = sorted(statements[statement], key=_member_key)
            one = f"{statement} {', '.join(names)}".rstrip()
            if len(one) <= _WIDTH:
                lines.append(one)
            else:
                lines += [f"{statement} (", *(f"    {name}," for name in names), ")"]
    return lines


def _statement_key(statement: str) -> tuple[bool, str]:
    return statement.startswith("from "), statement.split()[1].lower()


def _member_key(name: str) -> tuple[int, str]:
    bare = name.partition(" as ")[0]
    kind = 0 if len(bare) > 1 and bare.isupper() else 1 if bare[:1].isupper() else 2
    return kind, bare.lower()


# -- the module --------------------------------------------------------------------------------


def render(spec: Spec, package: str = "todo_sessions") -> str:
    """The source of ``spec``'s module."""
    members = [(member, *_method(member)) for member in _members(spec)]
    imports = _imports([(member, written) for member, _, written in members], spec)
    name = spec.async_cls.__name__
    lines = [
        f'"""`{name}`\'s public methods, blocking: written by ``python -m {package}._gen_sync``.',
        "",
        "Do not edit: change the async class and run it again (a test fails while this file is",
        "not what it writes). Each method is one call into the private loop thread.",
        '"""',
        "",
        *_import_lines(imports, package),
        "",
        "",
        f"class {spec.name}:",
        f'    """The blocking twin of each public member of `{name}`."""',
        "",
        f"    {spec.owner}: {name}",
        "    _thread: _LoopThread",
    ]
    for _, source, _ in members:
        lines += ["", *source]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}", description=__doc__)
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a file is not current"
    )
    parser.add_argument(
        "--dir", type=Path, default=Path(__file__).parent, help="where the files are (the package)"
    )
    options = parser.parse_args(argv)
    stale = []
    for spec in specs():
        path = options.dir / spec.file
        source = render(spec)
        if path.exists() and path.read_text(encoding="utf-8") == source:
            continue
        stale.append(path.name)
        if not options.check:
            path.write_text(source, encoding="utf-8")
    verb = "not current" if options.check else "written"
    for name in stale:
        print(f"{name}: {verb}")
    return 1 if stale and options.check else 0


if __name__ == "__main__":
    sys.exit(main())
