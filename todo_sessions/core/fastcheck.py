"""A fast yes-or-ask answer to "does this pydantic model accept this payload?".

The pydantic payload models of the catalog are the definition of every payload and the source
of every error message. Building model instances is most of what validating an append costs,
though, and an append only needs to know that its payload is valid. So `compile_check` turns a
model, once, into a plain function that answers True only for payloads the model certainly
accepts, and False for anything else ("ask the model", which then validates and names the
error).

It knows a small, exactly specified part of *strict* pydantic: ``int`` (with ``ge``), ``str``
(with ``min_length`` and ``max_length``), ``bool``, ``None``, ``Any``, literals of strings,
``dict[str, Any]``, ``list[T]``, unions, nested models, and unions of ``Annotated[Model,
Tag(...)]`` members picked by a callable `Discriminator`. Extra keys follow the model's
``extra`` setting; a key spelled as a field's Python name rather than its alias is left to
pydantic. A model that uses anything else (validators, other constraints, lax mode, alias paths,
default factories, custom schemas, a ``model_validate`` of its own, config that changes
validation) gets no function at all.

The functions are generated as Python source (like `dataclasses` does), because a chain of
closures costs about as much as pydantic itself. Only the model's field names and aliases (as
``repr`` of exact ``str`` values) and ``ge`` and length bounds (exact ``int``) are written into
the source; everything else is passed in by name.

Payloads are taken as a JSON parser returns them (dicts with ``str`` keys, lists, str, int,
float, bool, None), which is what an event holds.
"""

from __future__ import annotations

import itertools
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal

import annotated_types
from pydantic import BaseModel, Discriminator, Tag

__all__ = ["Check", "compile_check"]

Check = Callable[[Any], bool]

_HARMLESS_CONFIG = frozenset(
    {
        "title",
        "alias_generator",
        "populate_by_name",
        "validate_by_name",
        "validate_by_alias",
        "extra",
        "frozen",
        "strict",
        "serialize_by_alias",
        "json_schema_extra",
        "protected_namespaces",
        "defer_build",
        "use_attribute_docstrings",
        "loc_by_alias",
        "hide_input_in_errors",
        "validation_error_cause",
        "model_title_generator",
        "field_title_generator",
        "validate_assignment",
    }
)
"""Config keys that change nothing about which dict payloads strict validation accepts."""

_VALIDATOR_KINDS = ("validators", "field_validators", "root_validators", "model_validators")


class Unsupported(Exception):
    """The model uses something the fast check does not know."""


def compile_check(model: type[Any]) -> Check | None:
    """A function answering True only for payloads ``model.model_validate`` accepts, or None
    if the model uses anything outside the supported part of pydantic."""
    try:
        return _Compiler().model(model)
    except Exception:  # Unsupported, or an unusual model: pydantic validates it alone
        return None


def _plain_model(model: Any) -> bool:
    """Is ``model`` a strict pydantic model whose validation of dicts is its fields alone?"""
    if not isinstance(model, type) or not issubclass(model, BaseModel):
        return False
    config = model.model_config
    decorators = model.__pydantic_decorators__
    base_validate = BaseModel.__dict__["model_validate"].__func__
    base_schema = BaseModel.__dict__["__get_pydantic_core_schema__"].__func__
    return (
        model.__pydantic_complete__
        and not getattr(model, "__pydantic_root_model__", False)
        and model.__pydantic_post_init__ is None
        and config.get("strict") is True
        and config.get("validate_by_alias", True) is True
        and config.get("extra", "ignore") in ("allow", "ignore", "forbid")
        and config.keys() <= _HARMLESS_CONFIG
        and not any(getattr(decorators, kind) for kind in _VALIDATOR_KINDS)
        and getattr(model.model_validate, "__func__", None) is base_validate
        and getattr(model.__get_pydantic_core_schema__, "__func__", None) is base_schema
        and not any(  # typed extras (``__pydantic_extra__: dict[str, int]``) are validated
            "__pydantic_extra__" in getattr(cls, "__annotations__", {}) for cls in model.__mro__
        )
    )


class _Compiler:
    """Generates one module of check functions for one model and what it nests."""

    def __init__(self) -> None:
        self.names: dict[Any, str] = {}  # models and tagged unions compiled so far
        self.namespace: dict[str, Any] = {"_MISSING": _MISSING}
        self.sources: list[str] = []
        self.tables: list[str] = []  # assigned after every function is defined
        self.counter = itertools.count()

    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self.counter)}"

    def bind(self, value: Any, prefix: str = "_c") -> str:
        name = self.fresh(prefix)
        self.namespace[name] = value
        return name

    def model(self, model: type[Any]) -> Check:
        name = self.model_function(model)
        exec("\n".join(self.sources + self.tables), self.namespace)  # source from the model
        check: Check = self.namespace[name]
        return check

    def model_function(self, model: type[Any]) -> str:
        if model in self.names:
            return self.names[model]
        if not _plain_model(model):
            raise Unsupported(model)
        name = self.fresh("_check_model")
        self.names[model] = name
        config = model.model_config
        lines = [f"def {name}(v):", "    if type(v) is not dict:", "        return False"]
        keys: list[str] = []
        for field_name, info in model.model_fields.items():
            key = info.validation_alias if info.validation_alias is not None else info.alias
            key = field_name if key is None else key
            if (
                type(key) is not str
                or type(field_name) is not str
                or info.discriminator is not None
                or info.default_factory is not None
                or info.validate_default
            ):
                raise Unsupported(model, field_name)
            keys.append(key)
            test = self.expr(info.annotation, list(info.metadata), "x")
            if field_name != key:  # set by its Python name: pydantic decides
                lines += [f"    if {field_name!r} in v:", "        return False"]
            lines.append(f"    x = v.get({key!r}, _MISSING)")
            if info.is_required():
                lines += [f"    if x is _MISSING or not ({test}):", "        return False"]
            else:
                lines += [f"    if x is not _MISSING and not ({test}):", "        return False"]
        if config.get("extra") == "forbid":
            lines.append(f"    return v.keys() <= {self.bind(frozenset(keys), '_keys')}")
        else:
            lines.append("    return True")
        self.sources.append("\n".join(lines))
        return name

    def function(self, tp: Any) -> str:
        """The name of a one-argument function testing a value against ``tp``."""
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return self.model_function(tp)
        args = typing.get_args(tp)
        if typing.get_origin(tp) is Annotated and len(args) == 2 and _is_discriminator(args[1]):
            return self.tagged(args[0], args[1])
        name = self.fresh("_check_item")
        self.sources.append(f"def {name}(v):\n    return {self.expr(tp, [], 'v')}")
        return name

    def expr(self, tp: Any, metadata: list[Any], var: str) -> str:
        """A Python expression, True only if ``var`` is valid for ``tp`` with ``metadata``."""
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is Annotated:
            extra = list(args[1:])
            if any(_is_discriminator(meta) for meta in extra):
                if len(extra) != 1 or metadata:
                    raise Unsupported(tp)
                return f"{self.tagged(args[0], extra[0])}({var})"
            return self.expr(args[0], [*extra, *metadata], var)
        ge, lengths = _constraints(metadata)
        if ge is not None or lengths != (None, None):
            return _bounded(tp, metadata, var, ge, lengths)
        scalar = _scalar_expr(tp, var)
        if scalar is not None:
            return scalar
        if origin is Literal:
            if not args or not all(type(arg) is str for arg in args):
                raise Unsupported(tp)
            return f"(type({var}) is str and {var} in {self.bind(frozenset(args), '_literal')})"
        if origin is typing.Union or origin is types.UnionType:
            return "(" + " or ".join(self.expr(arg, [], var) for arg in args) + ")"
        if origin is list and len(args) == 1:
            return f"(type({var}) is list and all(map({self.function(args[0])}, {var})))"
        if origin is dict and args == (str, Any):
            return f"(type({var}) is dict)"  # the keys of a JSON object are str
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return f"{self.model_function(tp)}({var})"
        raise Unsupported(tp)

    def tagged(self, union: Any, discriminator: Any) -> str:
        """A function for a union of ``Annotated[T, Tag(...)]`` picked by a callable."""
        key = (union, discriminator.discriminator)  # the same union met again: one function
        if key in self.names:
            return self.names[key]
        pick = discriminator.discriminator
        if not callable(pick) or typing.get_origin(union) not in (typing.Union, types.UnionType):
            raise Unsupported(union)
        name = self.fresh("_check_tagged")
        self.names[key] = name  # before the members, which may nest this union again
        table = self.fresh("_members")
        self.sources.append(
            f"def {name}(v):\n"
            f"    check = {table}.get({self.bind(pick, '_pick')}(v))\n"
            "    return check is not None and check(v)"
        )
        members: dict[str, str] = {}
        for member in typing.get_args(union):
            parts = typing.get_args(member) if typing.get_origin(member) is Annotated else ()
            tags = [part for part in parts[1:] if isinstance(part, Tag)]
            if len(parts) != 2 or len(tags) != 1 or type(tags[0].tag) is not str:
                raise Unsupported(member)
            if tags[0].tag in members:
                raise Unsupported(member)
            members[tags[0].tag] = self.function(parts[0])
        self.tables.append(
            f"{table} = {{{', '.join(f'{tag!r}: {fn}' for tag, fn in members.items())}}}"
        )
        return name


_MISSING: Any = object()


def _constraints(metadata: list[Any]) -> tuple[int | None, tuple[int | None, int | None]]:
    """``(ge, (min_length, max_length))`` of a field's metadata; `Unsupported` for any other
    constraint."""
    found: dict[type[Any], int] = {}
    for meta in metadata:
        kind = type(meta)
        attribute = _BOUNDS.get(kind)
        value = getattr(meta, attribute, None) if attribute is not None else None
        if type(value) is not int or kind in found:
            raise Unsupported(meta)
        found[kind] = value
    bounds = (found.get(annotated_types.MinLen), found.get(annotated_types.MaxLen))
    return found.get(annotated_types.Ge), bounds


_BOUNDS: dict[type[Any], str] = {
    annotated_types.Ge: "ge",
    annotated_types.MinLen: "min_length",
    annotated_types.MaxLen: "max_length",
}


def _bounded(
    tp: Any, metadata: list[Any], var: str, ge: int | None, lengths: tuple[int | None, int | None]
) -> str:
    """The test of an int with a lower bound or of a str with bounds on its length."""
    least, most = lengths
    if tp is int and lengths == (None, None):
        return f"(type({var}) is int and {var} >= {ge!r})"
    if tp is str and ge is None:
        tests = [f"type({var}) is str"]
        if least is not None:
            tests.append(f"len({var}) >= {least!r}")
        if most is not None:
            tests.append(f"len({var}) <= {most!r}")
        return f"({' and '.join(tests)})"
    raise Unsupported(tp, metadata)


def _scalar_expr(tp: Any, var: str) -> str | None:
    """The test of a plain scalar type (int, str, bool, None, Any), or None for another."""
    if tp is int:
        return f"(type({var}) is int)"
    if tp is str:
        return f"(type({var}) is str)"
    if tp is Any:
        return "True"
    if tp is bool:
        return f"(type({var}) is bool)"
    if tp is None or tp is type(None):
        return f"({var} is None)"
    return None


def _is_discriminator(meta: Any) -> bool:
    return isinstance(meta, Discriminator)
