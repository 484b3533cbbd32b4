"""Tools the agent offers the model: the protocol, the registry and the ``todo_write`` tool."""

from .base import Tool, ToolContext, ToolResult, compile_schema, schema_problem
from .registry import ToolHandle, ToolRegistry, parse_arguments
from .todo_write import TODO_WRITE_PARAMETERS, TodoWriteTool, todo_write_description

__all__ = [
    "TODO_WRITE_PARAMETERS",
    "TodoWriteTool",
    "Tool",
    "ToolContext",
    "ToolHandle",
    "ToolRegistry",
    "ToolResult",
    "compile_schema",
    "parse_arguments",
    "schema_problem",
    "todo_write_description",
]
