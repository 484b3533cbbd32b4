"""The agent harness on the library: the loop, the model protocol and its adapters, the
provider request formats and the tools the model is offered (``todo_write`` and
``subagent`` among them).

`AgentLoop` drives a `Model` (the `ScriptedModel` of the demo and the tests, or a real one:
`OpenAIChatModel`, `OpenAIResponsesModel`, `AnthropicModel`, extra ``[models]``) over a live
`todo_sessions.Session`, and records every step in the session's log. The provider formats
are `todo_sessions.harness.providers`. See docs/providers.md.
"""

from importlib import import_module
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

if find_spec("jsonschema") is None:  # pragma: no cover - exercised in a subprocess
    raise ImportError("the agent harness needs jsonschema: pip install 'todo-sessions[harness]'")

# The public names, written once: where each lives. `__all__` and the lazy lookup below are
# made from this table; every name loads on first use (PEP 562).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "..errors": (
        "ModelAuthError",
        "ModelError",
        "ModelRequestError",
        "ProviderResponseError",
    ),
    ".adapters": (
        "AnthropicModel",
        "OpenAIChatModel",
        "OpenAIResponsesModel",
        "model_from_spec",
    ),
    ".compaction": ("CompactionPolicy",),
    ".deltas": (
        "Finish",
        "ModelDelta",
        "ReasoningDelta",
        "TextDelta",
        "ToolCallDelta",
        "content_from_deltas",
    ),
    ".loop": (
        "AgentLoop",
        "TurnOutcome",
    ),
    ".model": (
        "Model",
        "ScriptedModel",
        "ScriptedResponse",
    ),
    ".retry": ("RetryPolicy",),
    ".subagent": (
        "SubagentTool",
        "subagent_session_id",
    ),
    ".tools": (
        "TODO_WRITE_PARAMETERS",
        "TodoWriteTool",
        "Tool",
        "ToolContext",
        "ToolRegistry",
        "ToolResult",
    ),
}

_LAZY: dict[str, str] = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted([*_LAZY])

if TYPE_CHECKING:  # the same names for type checkers (tests/test_light_import.py holds them equal)
    from ..errors import ModelAuthError as ModelAuthError
    from ..errors import ModelError as ModelError
    from ..errors import ModelRequestError as ModelRequestError
    from ..errors import ProviderResponseError as ProviderResponseError
    from .adapters import AnthropicModel as AnthropicModel
    from .adapters import OpenAIChatModel as OpenAIChatModel
    from .adapters import OpenAIResponsesModel as OpenAIResponsesModel
    from .adapters import model_from_spec as model_from_spec
    from .compaction import CompactionPolicy as CompactionPolicy
    from .deltas import Finish as Finish
    from .deltas import ModelDelta as ModelDelta
    from .deltas import ReasoningDelta as ReasoningDelta
    from .deltas import TextDelta as TextDelta
    from .deltas import ToolCallDelta as ToolCallDelta
    from .deltas import content_from_deltas as content_from_deltas
    from .loop import AgentLoop as AgentLoop
    from .loop import TurnOutcome as TurnOutcome
    from .model import Model as Model
    from .model import ScriptedModel as ScriptedModel
    from .model import ScriptedResponse as ScriptedResponse
    from .retry import RetryPolicy as RetryPolicy
    from .subagent import SubagentTool as SubagentTool
    from .subagent import subagent_session_id as subagent_session_id
    from .tools import TODO_WRITE_PARAMETERS as TODO_WRITE_PARAMETERS
    from .tools import TodoWriteTool as TodoWriteTool
    from .tools import Tool as Tool
    from .tools import ToolContext as ToolContext
    from .tools import ToolRegistry as ToolRegistry
    from .tools import ToolResult as ToolResult


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return list(__all__)
