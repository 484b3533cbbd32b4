"""Session backends for the agent SDKs people build on, on the todo-sessions log.

- `todo_sessions.integrations.claude_agent_sdk.TodoSessionsStore`: the Claude Agent SDK
  ``SessionStore`` (extra ``[claude]``).
- `todo_sessions.integrations.openai_agents.TodoSessionsSession`: the OpenAI Agents SDK
  ``Session``, and `todo_write_tool` (extra ``[openai-agents]``).

Each module imports its SDK; this package imports neither (README.md, "Claude Agent SDK" and
"OpenAI Agents SDK"; docs/format.md, "SDK sessions"). Their event types register from
`_vocabulary`, which imports no SDK: a process that only reads a store loads it when it meets
them (docs/format.md, "Vocabularies").
"""

__all__ = ["claude_agent_sdk", "openai_agents"]
