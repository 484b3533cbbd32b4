"""Every installed vocabulary of event types, made known before a log is validated or read.

The core's catalog registers the types of the log format itself (docs/format.md, "The
catalog"). Other types belong to the code that writes them and register from its side: the SDK
session backends (`todo_sessions.integrations`: ``claude/entry``, ``agents/item``,
``agents/retract``), the importers (``import/verbatim``, ``codex/entry``), and the
vocabularies other distributions declare in the entry-point group ``todo_sessions.vocabularies``
(docs/format.md, "Your own event types").

A process that reads a log must know them all, whether or not it imported the code that wrote
them: else it would keep their (ignorable) events unchecked, and refuse a non-ignorable one as
unknown. So the first time a type is not registered where the library validates or decodes an
event (`known`: the store's append and read, a live session's append, a JSONL file's lines),
every vocabulary is loaded, once per process; `load_vocabularies` loads them when asked. The
loaded vocabularies register into the registry (`todo_sessions.core.registry`), which is the
only state this changes; what is kept here is only whether that load happened.
"""

from __future__ import annotations

import threading
import warnings
from importlib import import_module
from types import ModuleType

from .core.registry import EVENT_TYPES

__all__ = ["BUILT_IN_VOCABULARIES", "VOCABULARY_GROUP", "known", "load_vocabularies"]

VOCABULARY_GROUP = "todo_sessions.vocabularies"
"""The entry-point group of other distributions' vocabularies. An entry point names a module
(importing it registers its types) or a function of no argument (called after its import)."""

BUILT_IN_VOCABULARIES = (
    "todo_sessions.integrations._vocabulary",
    "todo_sessions.importers._vocabulary",
)
"""The package's own vocabulary modules, found without the installed metadata (none of them
imports an optional dependency)."""

_lock = threading.RLock()
_started = False
"""Whether a load began in this process (a vocabulary that reads a log while it loads does not
load them again)."""
_done = False
"""Whether a load ended in this process (`known` loads no more)."""


def _third_party(names: list[str]) -> None:
    """Load each entry point of `VOCABULARY_GROUP`; one that fails is skipped with a warning."""
    from importlib.metadata import entry_points  # not imported until a vocabulary is needed

    for point in entry_points(group=VOCABULARY_GROUP):
        try:
            target = point.load()
            if callable(target) and not isinstance(target, (ModuleType, type)):
                target()
        except Exception as exc:  # a broken plugin must not break every read of a store
            where = point.dist.name if point.dist is not None else "an unknown distribution"
            warnings.warn(
                f"the event vocabulary {point.name!r} = {point.value!r} (entry point of "
                f"{where} in {VOCABULARY_GROUP!r}) failed to load: {type(exc).__name__}: "
                f"{exc}; its event types stay unknown to todo_sessions",
                RuntimeWarning,
                stacklevel=2,
            )
            continue
        names.append(point.value)


def load_vocabularies() -> list[str]:
    """Register every installed vocabulary: the package's own (`BUILT_IN_VOCABULARIES`),
    then each entry point of the group ``todo_sessions.vocabularies``. Returns what was
    loaded (module names, entry-point values). Loading again is harmless (registering a type
    again with the same model changes nothing); a vocabulary that fails to load (it raises, or
    registers a type already registered with another model) is skipped with a
    `RuntimeWarning` naming it."""
    global _started, _done
    with _lock:
        _started = True
        try:
            names: list[str] = []
            for module in BUILT_IN_VOCABULARIES:
                import_module(module)
                names.append(module)
            _third_party(names)
        finally:
            _done = True
        return names


def known(type_name: str) -> bool:
    """Whether ``type_name`` is a registered event type, once every installed vocabulary is
    loaded: the first time a type is not registered, `load_vocabularies` runs (once per
    process: call it again to load vocabularies installed since). A thread that comes while
    another loads waits for it."""
    if type_name in EVENT_TYPES:
        return True
    if not _done:
        with _lock:  # waits for a load under way in another thread (reentrant in this one)
            if not _started:
                load_vocabularies()
    return type_name in EVENT_TYPES
