"""Provider request formats: the derived history to what each API wants, and back.

- `todo_sessions.harness.providers.openai_chat`: OpenAI Chat Completions (and compatible APIs).
- `todo_sessions.harness.providers.openai_responses`: OpenAI Responses (stateless, encrypted
  reasoning).
- `todo_sessions.harness.providers.anthropic`: Anthropic Messages (thinking signatures kept).

Each module has ``to_request(messages, *, model, system, tools, ...)`` giving the SDK's
request params as plain dicts, ``parse_response(dict)`` and a stream decoder (``feed(event)``,
``end()``) giving the agent loop's deltas (`todo_sessions.harness.deltas`, which the agent imports
too: the formats never import the agent). Pure: no SDK import, no I/O. See docs/providers.md.
"""

__all__: list[str] = []  # the formats are the modules above; the package itself exports nothing
