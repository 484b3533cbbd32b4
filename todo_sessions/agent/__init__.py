"""The agent side: the model interface, the scripted model, the model adapters and the loop.

Implementation: its public names (`AgentLoop`, `Model`, `ScriptedModel`, `AnthropicModel`,
`OpenAIChatModel`, `OpenAIResponsesModel`, `model_from_spec`, ...) are exported from
`todo_sessions`; import them from there.
"""

__all__: list[str] = []
