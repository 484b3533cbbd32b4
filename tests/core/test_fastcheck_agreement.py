"""The compiled fast checks answer exactly like strict pydantic on the part they know, and
refuse to compile anything else (issue #17; see todo_sessions/core/fastcheck.py).

Inside the supported part (``int`` with ``ge``, ``str`` with ``min_length``, ``bool``, ``None``,
``Any``, string literals, ``dict[str, Any]``, ``list[T]``, unions, nested models, unions of
tagged members picked by a callable), a check says True exactly when the model accepts the
payload; the one documented exception is a key spelled as a field's Python name, which is left
to pydantic (False).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

import annotated_types
import pytest
from pydantic import (
    AfterValidator,
    AliasPath,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    RootModel,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

from todo_sessions.core import fastcheck
from todo_sessions.core.fastcheck import compile_check


def accepts(model: type[BaseModel], value: Any) -> bool:
    try:
        model.model_validate(value)
    except ValidationError:
        return False
    return True


def agree(model: type[BaseModel], values: list[Any]) -> None:
    check = compile_check(model)
    assert check is not None, model
    for value in values:
        assert check(value) is accepts(model, value), value


class Strict(BaseModel):
    model_config = ConfigDict(strict=True)


# -- scalars and bounds --------------------------------------------------------------------------


class Scalars(Strict):
    n: int
    pos: Annotated[int, Field(ge=1)]
    s: str
    word: str = Field(min_length=2)
    flag: bool
    nothing: None
    anything: Any


SCALARS = {"n": 0, "pos": 1, "s": "", "word": "ab", "flag": False, "nothing": None, "anything": []}


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"n": -5},
        {"n": True},
        {"n": 1.0},
        {"n": "1"},
        {"pos": 0},
        {"pos": 2},
        {"pos": True},
        {"s": 1},
        {"s": b"x"},
        {"word": "a"},
        {"word": "abc"},
        {"word": 12},
        {"flag": 1},
        {"flag": True},
        {"flag": "true"},
        {"nothing": 0},
        {"nothing": False},
        {"anything": object()},
        {"anything": None},
        {"extra": 1},
    ],
)
def test_scalars(change: dict[str, Any]) -> None:
    agree(Scalars, [{**SCALARS, **change}])


def test_missing_required_fields_and_non_dicts() -> None:
    values: list[Any] = [{k: v for k, v in SCALARS.items() if k != key} for key in SCALARS]
    agree(Scalars, [*values, [], None, "x", 1, [SCALARS]])


class Optional(Strict):
    a: int | None = None
    b: str = "x"
    c: Literal["p", "q"] = "p"


def test_optional_fields_may_be_missing_but_not_wrong() -> None:
    agree(
        Optional,
        [{}, {"a": None}, {"a": 1}, {"a": "1"}, {"b": "y"}, {"b": None}, {"c": "q"}, {"c": "r"}],
    )


# -- literals, unions, containers ----------------------------------------------------------------


class Containers(Strict):
    kind: Literal["a", "b"]
    union: int | str
    items: list[int]
    nested: list[list[str]]
    obj: dict[str, Any]
    maybe: list[int] | None


BASE = {"kind": "a", "union": 1, "items": [], "nested": [["x"]], "obj": {}, "maybe": None}


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"kind": "b"},
        {"kind": "c"},
        {"kind": 1},
        {"kind": ["a"]},
        {"union": "s"},
        {"union": 1.5},
        {"union": None},
        {"items": [1, 2]},
        {"items": [1, "2"]},
        {"items": (1,)},
        {"items": {"a": 1}},
        {"nested": [[]]},
        {"nested": [["x", 1]]},
        {"nested": ["x"]},
        {"obj": {"a": [1]}},
        {"obj": []},
        {"maybe": [3]},
        {"maybe": 3},
    ],
)
def test_literals_unions_and_containers(change: dict[str, Any]) -> None:
    agree(Containers, [{**BASE, **change}])


class BoundedItems(Strict):
    counts: list[Annotated[int, annotated_types.Ge(0)]]
    words: list[Annotated[str, annotated_types.MinLen(2)]] = []


@pytest.mark.parametrize(
    "value",
    [
        {"counts": [0, 3]},
        {"counts": [-1]},
        {"counts": [1], "words": ["ab", "cde"]},
        {"counts": [1], "words": ["ab", "c"]},
    ],
)
def test_bounds_inside_lists(value: Any) -> None:
    agree(BoundedItems, [value])


# -- nested models, aliases, extra keys ------------------------------------------------------------


class Inner(Strict):
    model_config = ConfigDict(strict=True, extra="forbid")
    x: int


class Outer(Strict):
    model_config = ConfigDict(strict=True, alias_generator=to_camel, populate_by_name=True)
    call_id: str = Field(min_length=1)
    inner: Inner
    more: list[Inner] = []


@pytest.mark.parametrize(
    "value",
    [
        {"callId": "c", "inner": {"x": 1}},
        {"callId": "c", "inner": {"x": 1}, "more": [{"x": 2}]},
        {"callId": "c", "inner": {"x": 1, "y": 2}},
        {"callId": "c", "inner": {}},
        {"callId": "c", "inner": {"x": 1}, "more": [{"x": "2"}]},
        {"callId": "", "inner": {"x": 1}},
        {"inner": {"x": 1}},
        {"callId": "c", "inner": {"x": 1}, "other": 1},
    ],
)
def test_nested_models_aliases_and_extra_keys(value: Any) -> None:
    agree(Outer, [value])


def test_a_python_name_is_left_to_pydantic() -> None:
    check = compile_check(Outer)
    assert check is not None
    by_name = {"call_id": "c", "inner": {"x": 1}}
    assert accepts(Outer, by_name) and check(by_name) is False
    both = {"callId": "c", "call_id": "c", "inner": {"x": 1}}
    assert check(both) is False


class Forbid(Strict):
    model_config = ConfigDict(strict=True, extra="forbid")
    a: int
    b: int = 0


class Ignore(Strict):
    model_config = ConfigDict(strict=True, extra="ignore")
    a: int


def test_extra_keys_follow_the_config() -> None:
    agree(Forbid, [{"a": 1}, {"a": 1, "b": 2}, {"a": 1, "c": 2}, {"b": 1}])
    agree(Ignore, [{"a": 1}, {"a": 1, "c": [object()]}])


# -- tagged unions -------------------------------------------------------------------------------


class Cat(Strict):
    type: Literal["cat"] = "cat"
    lives: int


class Dog(Strict):
    type: Literal["dog"] = "dog"
    good: bool


def pick(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else None
    return kind if kind in ("cat", "dog") else None


Pet = Annotated[
    Annotated[Cat, Tag("cat")] | Annotated[Dog, Tag("dog")],
    Discriminator(pick),
]


class Home(Strict):
    pets: list[Pet]
    first: Pet | None = None


@pytest.mark.parametrize(
    "value",
    [
        {"pets": []},
        {"pets": [{"type": "cat", "lives": 9}, {"type": "dog", "good": True}]},
        {"pets": [{"type": "cat", "good": True}]},
        {"pets": [{"type": "dog", "lives": 9}]},
        {"pets": [{"type": "fish"}]},
        {"pets": [{"lives": 9}]},
        {"pets": ["cat"]},
        {"pets": [], "first": {"type": "dog", "good": False}},
        {"pets": [], "first": {"type": "dog", "good": 0}},
    ],
)
def test_a_tagged_union_picks_its_member(value: Any) -> None:
    agree(Home, [value])


class Node(Strict):
    type: Literal["node"] = "node"
    children: list[Tree]


Tree = Annotated[
    Annotated[Node, Tag("node")] | Annotated[Cat, Tag("cat")],
    Discriminator(lambda v: v.get("type") if isinstance(v, dict) else None),
]
Node.model_rebuild()


def test_a_union_that_nests_itself() -> None:
    deep: Any = {"type": "node", "children": []}
    for _ in range(5):
        deep = {"type": "node", "children": [deep, {"type": "cat", "lives": 1}]}
    bad = {"type": "node", "children": [{"type": "node", "children": [{"type": "cat"}]}]}
    agree(Node, [deep, bad, {"type": "node", "children": [{"type": "dog"}]}])


# -- the models of the catalog ---------------------------------------------------------------------


def test_the_catalog_models_compile() -> None:
    from todo_sessions.core import catalog

    # the core's own types (whatever else a test in this process registered, e.g. importers)
    core = {
        name
        for name, entry in catalog.EVENT_TYPES.items()
        if entry.model.__module__.startswith("todo_sessions.core.")
    }
    compiled = {name for name, check in catalog._CHECKS.items() if check is not None} & core
    # turn/end, tool/result and request/header (its upcaster) carry model validators, and
    # three rare records of the reference's vocabulary have float fields (durations, a title
    # request's messages): pydantic validates them alone (so do the compaction records, rare
    # enough not to need a fast check)
    uncompiled = {"turn/end", "tool/result", "request/header"}
    uncompiled |= {"hook/result", "llm/retry", "session/title-llm-request"}
    uncompiled |= {name for name in catalog.EVENT_TYPES if name.startswith("compaction/")}
    assert compiled == core - uncompiled


# -- what is left to pydantic --------------------------------------------------------------------


class PostInit(Strict):
    n: int

    def model_post_init(self, context: Any) -> None:
        pass


class ByNameOnly(BaseModel):
    model_config = ConfigDict(strict=True, validate_by_alias=False, validate_by_name=True)
    n: int


class OwnValidate(Strict):
    n: int

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Any:
        return super().model_validate(obj, *args, **kwargs)


class OwnSchema(Strict):
    n: int

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        return handler(source)


class Stripping(BaseModel):
    model_config = ConfigDict(strict=True, str_strip_whitespace=True)
    s: str


class AfterModel(Strict):
    n: int

    @model_validator(mode="after")
    def _check(self) -> AfterModel:
        return self


class PathAlias(Strict):
    n: int = Field(validation_alias=AliasPath("a", 0))


class ValidateDefault(Strict):
    n: int = Field(default=0, validate_default=True)


class Incomplete(Strict):
    later: Undefined  # type: ignore[name-defined]  # noqa: F821


class GeFloat(Strict):
    n: int = Field(ge=1.0)


class TwoGe(Strict):
    n: Annotated[int, Field(ge=1), Field(ge=2)]


class TwoMinLen(Strict):
    s: Annotated[str, Field(min_length=1), Field(min_length=2)]


class IntMinLen(Strict):
    n: Annotated[int, Field(min_length=1)]


class StrGe(Strict):
    s: Annotated[str, Field(ge=1)]


class ListGe(Strict):
    items: Annotated[list[int], Field(min_length=1)]


class IntLiteral(Strict):
    n: Literal[1, 2]


class FloatField(Strict):
    f: float


class TupleField(Strict):
    t: tuple[int, int]


class IntKeys(Strict):
    d: dict[int, Any]


class StringDiscriminator(Strict):
    pet: Annotated[Cat | Dog, Discriminator("type")]


class FieldDiscriminator(Strict):
    pet: Cat | Dog = Field(discriminator="type")


class DiscriminatorWithMore(Strict):
    pet: Annotated[
        Annotated[Cat, Tag("cat")] | Annotated[Dog, Tag("dog")], Discriminator(pick), Field(ge=1)
    ]


class NestedUnsupported(Strict):
    inner: FloatField


def no_nine_lives(value: Any) -> Any:
    if getattr(value, "lives", None) == 9:
        raise ValueError("nine")
    return value


class ValidatedPets(Strict):
    pets: list[
        Annotated[
            Annotated[Cat, Tag("cat")] | Annotated[Dog, Tag("dog")],
            Discriminator(pick),
            AfterValidator(no_nine_lives),
        ]
    ]


class StrictRoot(RootModel[int]):
    model_config = ConfigDict(strict=True)


NOT_COMPILED = [
    PostInit,
    ByNameOnly,
    OwnValidate,
    OwnSchema,
    Stripping,
    AfterModel,
    PathAlias,
    ValidateDefault,
    Incomplete,
    GeFloat,
    TwoGe,
    TwoMinLen,
    IntMinLen,
    StrGe,
    ListGe,
    IntLiteral,
    FloatField,
    TupleField,
    IntKeys,
    StringDiscriminator,
    FieldDiscriminator,
    DiscriminatorWithMore,
    NestedUnsupported,
    ValidatedPets,
    StrictRoot,
]


@pytest.mark.parametrize("model", NOT_COMPILED, ids=lambda m: m.__name__)
def test_models_outside_the_known_part_get_no_check(model: type[BaseModel]) -> None:
    assert compile_check(model) is None


@pytest.mark.parametrize("value", [dict, int, 5, "Model", None, BaseModel])
def test_only_pydantic_model_classes_compile(value: Any) -> None:
    assert compile_check(value) is None


def test_plain_model() -> None:
    assert fastcheck._plain_model(Scalars) is True
    assert fastcheck._plain_model(PostInit) is False
    assert fastcheck._plain_model(Incomplete) is False
    assert fastcheck._plain_model(dict) is False
    assert fastcheck._plain_model(Scalars(**SCALARS)) is False


HARMLESS = {
    "title": "T",
    "alias_generator": to_camel,
    "populate_by_name": True,
    "validate_by_name": True,
    "validate_by_alias": True,
    "extra": "allow",
    "frozen": True,
    "serialize_by_alias": True,
    "json_schema_extra": {"x": 1},
    "protected_namespaces": (),
    "defer_build": False,
    "use_attribute_docstrings": True,
    "loc_by_alias": False,
    "hide_input_in_errors": True,
    "validation_error_cause": True,
    "model_title_generator": lambda m: "T",
    "field_title_generator": lambda n, f: "T",
    "validate_assignment": True,
}


@pytest.mark.parametrize("key", sorted(HARMLESS))
def test_config_that_does_not_change_validation_still_compiles(key: str) -> None:
    model = type(
        f"With_{key}",
        (BaseModel,),
        {
            "__annotations__": {"n": int},
            "model_config": ConfigDict(strict=True, **{key: HARMLESS[key]}),  # type: ignore[misc]
        },
    )
    assert compile_check(model) is not None


def test_config_of_only_harmless_keys_compiles() -> None:
    everything = ConfigDict(strict=True, **HARMLESS)  # type: ignore[typeddict-item]

    class Everything(BaseModel):
        model_config = everything
        n: int

    assert set(Everything.model_config) == set(HARMLESS) | {"strict"}
    assert compile_check(Everything) is not None


def test_the_generated_source_holds_only_names_and_bounds() -> None:
    compiler = fastcheck._Compiler()
    compiler.model(Outer)
    source = "\n".join(compiler.sources + compiler.tables)
    assert "'callId'" in source and "'call_id'" in source and ">= 1" in source
    assert "_MISSING" in source


UNSUPPORTED_TYPES: dict[str, Any] = {
    "untagged member": Annotated[Cat | Annotated[Dog, Tag("dog")], Discriminator(pick)],
    "two tags": Annotated[
        Annotated[Cat, Tag("cat"), Tag("kitty")] | Annotated[Dog, Tag("dog")], Discriminator(pick)
    ],
    "int tag": Annotated[Annotated[Cat, Tag(1)] | Annotated[Dog, Tag("dog")], Discriminator(pick)],  # type: ignore[arg-type]
    "same tag": Annotated[Annotated[Cat, Tag("x")] | Annotated[Dog, Tag("x")], Discriminator(pick)],
    "not a union": Annotated[Annotated[Cat, Tag("cat")], Discriminator(pick)],
    "field name discriminator": Annotated[
        Annotated[Cat, Tag("cat")] | Annotated[Dog, Tag("dog")], Discriminator("type")
    ],
    "empty literal": Literal[()],  # type: ignore[misc]
    "float": float,
    "set": set[int],
    "list of two": list[int, str],  # type: ignore[misc]
    "dict of ints": dict[str, int],
    "type variable": TypeVar("T"),
    "a string": "int",
}


@pytest.mark.parametrize("tp", UNSUPPORTED_TYPES.values(), ids=UNSUPPORTED_TYPES.keys())
def test_types_outside_the_known_part_are_unsupported(tp: Any) -> None:
    with pytest.raises(fastcheck.Unsupported):
        fastcheck._Compiler().expr(tp, [], "v")
