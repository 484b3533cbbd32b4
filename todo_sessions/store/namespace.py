"""Namespaces: where one store's tables live in a database it shares with others.

A `Namespace` is a PostgreSQL schema (``schema="agent"``: every table, index, trigger,
trigger function and the alembic version table in that schema, created by the migrations) or
an SQLite table prefix (``table_prefix="agent_"``: every table name starts with it, the
version table's too, and index, constraint and trigger names hold it after their kind:
``ix_agent_...``, ``trg_agent_...``). The default namespace has neither: exactly the
names every database had before namespaces existed. See docs/design.md, "Namespaces".

A namespace owns its tables (`schema.define_tables`), their Core statements
(`queries.build_queries`) and, per backend, those statements compiled for the driver the hot
paths talk to (`Namespace.compiled`). The default namespace is built once, at import
(`DEFAULT`); any other is built when a store (or a migration) is made for it, and lives as
long as that store: nothing here caches what callers pass.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import MetaData, Table

from ..errors import NamespaceError
from .queries import (
    DEFAULT_QUERIES,
    AppendStatements,
    Queries,
    WriteStatements,
    build_queries,
    compile_append,
    compile_writes,
)
from .read_sql import CompiledRead, compile_reads
from .schema import (
    DEFAULT_TABLES,
    FTS5_SHADOWS,
    SEARCH_FTS,
    TABLE_NAMES,
    VERSION_TABLE,
    Tables,
    define_tables,
)

__all__ = [
    "DEFAULT",
    "MIGRATION_ATTRIBUTE",
    "NOTIFY_CHANNEL",
    "PREFIX_MAX",
    "SCHEMA_MAX",
    "Namespace",
    "Statements",
    "migration_namespace",
    "resolve",
]

NOTIFY_CHANNEL = "todo_sessions_appended"
"""The default namespace's NOTIFY channel; a schema's is ``todo_sessions_appended_<schema>``."""

SCHEMA_MAX = 40
"""Longest schema name: its NOTIFY channel (``todo_sessions_appended_<schema>``) must stay
within PostgreSQL's 63-byte identifiers. Names of indexes, constraints, triggers and functions
in a schema are the default namespace's, which fit."""

PREFIX_MAX = 32
"""Longest table prefix (SQLite has no length limit; this keeps names readable)."""

MIGRATION_ATTRIBUTE = "todo_sessions_namespace"
"""The alembic ``config.attributes`` key that hands the namespace to our revisions."""

_NAME = re.compile(r"[a-z_][a-z0-9_]*")
_RESERVED_SCHEMAS = frozenset({"public", "information_schema"})


def _check_name(option: str, value: object, longest: int) -> str:
    if not isinstance(value, str):
        raise NamespaceError(
            f"{option} must be a str, got {type(value).__name__}", option=option, value=value
        )
    if not _NAME.fullmatch(value):
        raise NamespaceError(
            f"{option} {value!r} is not a plain identifier: use lowercase letters, digits and "
            "underscores, not starting with a digit",
            option=option,
            value=value,
        )
    if len(value) > longest:
        raise NamespaceError(
            f"{option} {value!r} is {len(value)} characters long; at most {longest} are allowed",
            option=option,
            value=value,
        )
    return value


@dataclass(frozen=True, slots=True)
class Statements:
    """A namespace's statements compiled for one backend's driver."""

    append: AppendStatements
    reads: Mapping[str, CompiledRead]
    writes: WriteStatements


class Namespace:
    """Where a store's tables live: ``Namespace(schema="agent")`` (PostgreSQL) or
    ``Namespace(table_prefix="agent_")`` (SQLite); ``Namespace()`` is the default.

    Names are lowercase identifiers (letters, digits, ``_``, not starting with a digit): a
    schema of at most `SCHEMA_MAX` characters, neither ``public`` (that is the default
    namespace: leave ``schema`` out) nor ``information_schema`` nor ``pg_...``; a prefix of at
    most `PREFIX_MAX`, not starting with ``sqlite_``. Anything else is a `NamespaceError`
    naming the value. Immutable; two namespaces with the same names are equal.

    For a host application's alembic: `metadata` holds our tables in this namespace, and
    `include_object` / `include_name` are the autogenerate hooks that leave them (and our
    version table) out.
    """

    __slots__ = (
        "_compiled",
        "_lock",
        "notify_channel",
        "queries",
        "schema",
        "table_prefix",
        "tables",
        "version_table",
    )

    schema: str | None
    table_prefix: str
    tables: Tables
    queries: Queries
    version_table: str
    notify_channel: str
    _compiled: dict[str, Statements]
    _lock: threading.Lock

    def __init__(self, *, schema: str | None = None, table_prefix: str | None = None) -> None:
        if schema is not None:
            _check_name("schema", schema, SCHEMA_MAX)
            if schema in _RESERVED_SCHEMAS or schema.startswith("pg_"):
                hint = " (the default namespace: leave schema out)" if schema == "public" else ""
                raise NamespaceError(
                    f"schema {schema!r} is reserved{hint}", option="schema", value=schema
                )
        if table_prefix:
            _check_name("table_prefix", table_prefix, PREFIX_MAX)
            if table_prefix.startswith("sqlite_"):
                raise NamespaceError(
                    f"table_prefix {table_prefix!r}: SQLite reserves names starting with sqlite_",
                    option="table_prefix",
                    value=table_prefix,
                )
        elif table_prefix is not None and not isinstance(table_prefix, str):
            _check_name("table_prefix", table_prefix, PREFIX_MAX)
        prefix = table_prefix or ""
        default = schema is None and not prefix
        tables = DEFAULT_TABLES if default else define_tables(prefix, schema)
        setter = object.__setattr__
        setter(self, "schema", schema)
        setter(self, "table_prefix", prefix)
        setter(self, "tables", tables)
        setter(self, "queries", DEFAULT_QUERIES if default else build_queries(tables))
        setter(self, "version_table", prefix + VERSION_TABLE)
        setter(self, "notify_channel", NOTIFY_CHANNEL + (f"_{schema}" if schema else ""))
        setter(self, "_compiled", {})
        setter(self, "_lock", threading.Lock())

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a Namespace is immutable (cannot set {name!r})")

    def __repr__(self) -> str:
        if self.is_default:
            return "Namespace()"
        if self.schema is None:
            return f"Namespace(table_prefix={self.table_prefix!r})"
        if not self.table_prefix:
            return f"Namespace(schema={self.schema!r})"
        return f"Namespace(schema={self.schema!r}, table_prefix={self.table_prefix!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Namespace):
            return NotImplemented
        return (self.schema, self.table_prefix) == (other.schema, other.table_prefix)

    def __hash__(self) -> int:
        return hash((Namespace, self.schema, self.table_prefix))

    def __reduce__(self) -> Any:  # rebuilt from its names (tables are not picklable)
        return (_rebuild, (self.schema, self.table_prefix))

    # -- names ----------------------------------------------------------------------------------

    @property
    def is_default(self) -> bool:
        """No schema and no prefix: today's names, in the connection's default schema."""
        return self.schema is None and not self.table_prefix

    @property
    def metadata(self) -> MetaData:
        """Our tables in this namespace (for a host's alembic, or comparisons)."""
        return self.tables.metadata

    @property
    def table_names(self) -> frozenset[str]:
        """Our tables' names (prefixed; without the schema)."""
        return frozenset(self.table_prefix + name for name in TABLE_NAMES)

    @property
    def derived_names(self) -> frozenset[str]:
        """Tables of ours outside the metadata: SQLite's FTS5 search index and its shadow
        tables (revision 0010)."""
        base = self.table_prefix + SEARCH_FTS
        return frozenset(base + suffix for suffix in FTS5_SHADOWS)

    def name(self, base: str) -> str:
        """The name of our table (or trigger, index …) ``base`` here: prefixed."""
        return self.table_prefix + base

    def table(self, base: str) -> Table:
        """Our table ``base`` (a name of `schema.TABLE_NAMES`) in this namespace."""
        if base not in TABLE_NAMES:
            raise KeyError(base)
        table: Table = getattr(self.tables, base)
        return table

    def ref(self, base: str) -> str:
        """``schema.name`` (or just the name): how alembic's foreign keys refer to a table."""
        name = self.name(base)
        return name if self.schema is None else f"{self.schema}.{name}"

    def sql_name(self, base: str) -> str:
        """Our table ``base`` as SQL text, schema-qualified (the schema quoted) when there is
        one, so no ``search_path`` ever redirects it: ``"agent".sessions``,
        ``agent_sessions``, or ``sessions`` in the default namespace."""
        return self.qualify(self.name(base))

    def qualify(self, name: str) -> str:
        """Any object name (a trigger function's) qualified with the schema, if any."""
        return name if self.schema is None else f'"{self.schema}".{name}'

    def check_dialect(self, dialect: str) -> None:
        """`NamespaceError` unless this namespace fits the backend: ``schema`` is
        PostgreSQL's, ``table_prefix`` SQLite's."""
        if dialect == "sqlite" and self.schema is not None:
            raise NamespaceError(
                f"schema={self.schema!r} is for PostgreSQL; SQLite has no schemas: use "
                "table_prefix= instead",
                option="schema",
                value=self.schema,
            )
        if dialect == "postgresql" and self.table_prefix:
            raise NamespaceError(
                f"table_prefix={self.table_prefix!r} is for SQLite; on PostgreSQL put the "
                "tables in a schema of their own with schema= instead",
                option="table_prefix",
                value=self.table_prefix,
            )

    # -- statements -------------------------------------------------------------------------------

    def compiled(self, backend: str, dialect: Any, insert: Callable[[Table], Any]) -> Statements:
        """The statements of every operation compiled for a backend's driver (``dialect``,
        with its ``insert`` construct), once per namespace and backend (the backend modules
        say which driver: qmark sqlite3, asyncpg)."""
        found: Statements | None = self._compiled.get(backend)
        if found is None:
            with self._lock:
                found = self._compiled.get(backend)
                if found is None:
                    queries = self.queries
                    found = Statements(
                        append=compile_append(dialect, insert, queries),
                        reads=compile_reads(dialect, queries),
                        writes=compile_writes(dialect, queries),
                    )
                    self._compiled[backend] = found
        return found

    # -- a host's alembic autogenerate --------------------------------------------------------

    def owns(self, table_name: str | None, schema: str | None) -> bool:
        """Whether ``schema.table_name`` is one of our tables here, or our version table."""
        return (
            table_name is not None
            and schema == self.schema
            and (
                table_name in self.table_names
                or table_name == self.version_table
                or table_name in self.derived_names
            )
        )

    def include_name(self, name: str | None, type_: str, parent_names: Mapping[str, Any]) -> bool:
        """An ``include_name`` hook for a host application's alembic ``context.configure``:
        skip our tables (and their columns, indexes and constraints) and our version table,
        so the host's autogenerate never proposes to drop or change them."""
        if type_ == "table":
            return not self.owns(name, parent_names.get("schema_name"))
        if "table_name" in parent_names:
            return not self.owns(parent_names["table_name"], parent_names.get("schema_name"))
        return True

    def include_object(
        self, obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
    ) -> bool:
        """An ``include_object`` hook for a host application's alembic ``context.configure``:
        the same as `include_name`, judged on the objects (tables, and the indexes, columns
        and constraints of tables)."""
        table = obj if type_ == "table" else getattr(obj, "table", None)
        table_name = name if type_ == "table" else getattr(table, "name", None)
        return not self.owns(table_name, getattr(table, "schema", None))


def _rebuild(schema: str | None, table_prefix: str) -> Namespace:
    return (
        DEFAULT
        if schema is None and not table_prefix
        else Namespace(schema=schema, table_prefix=table_prefix)
    )


DEFAULT = Namespace()
"""The default namespace (no schema, no prefix), built once."""


def resolve(
    dialect: str,
    *,
    schema: str | None = None,
    table_prefix: str | None = None,
    url_schema: str | None = None,
    url_table_prefix: str | None = None,
) -> Namespace:
    """The namespace of a store: the keyword arguments and the URL's ``schema`` /
    ``table_prefix`` parameters (the same value twice is fine; two different ones are a
    `NamespaceError`), checked against the backend. Neither given: `DEFAULT`."""
    for option, keyword, in_url in (
        ("schema", schema, url_schema),
        ("table_prefix", table_prefix, url_table_prefix),
    ):
        if keyword is not None and in_url is not None and keyword != in_url:
            raise NamespaceError(
                f"{option}={keyword!r} contradicts the URL's {option}={in_url!r}",
                option=option,
                value=keyword,
            )
    schema = schema if schema is not None else url_schema
    table_prefix = table_prefix if table_prefix is not None else url_table_prefix
    if schema is None and not table_prefix:
        return DEFAULT
    namespace = Namespace(schema=schema, table_prefix=table_prefix)
    namespace.check_dialect(dialect)
    return namespace


def migration_namespace() -> Namespace:
    """The namespace an alembic run of ours migrates (our revisions call this): what
    ``config.attributes[MIGRATION_ATTRIBUTE]`` holds, else the default (``alembic upgrade
    head`` from a checkout without one)."""
    from alembic import context

    found = context.config.attributes.get(MIGRATION_ATTRIBUTE)
    if found is None:
        return DEFAULT
    if not isinstance(found, Namespace):
        raise TypeError(f"config.attributes[{MIGRATION_ATTRIBUTE!r}] must be a Namespace")
    return found
