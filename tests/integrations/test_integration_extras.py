"""Without its SDK, importing an integration is one ImportError line naming the extra."""

from __future__ import annotations

import importlib
import sys

import pytest


@pytest.mark.parametrize(
    ("module", "sdk", "extra"),
    [
        ("claude_agent_sdk", "claude_agent_sdk", "claude"),
        ("openai_agents", "agents", "openai-agents"),
    ],
)
def test_without_the_sdk_the_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, module: str, sdk: str, extra: str
) -> None:
    name = f"todo_sessions.integrations.{module}"
    monkeypatch.setitem(sys.modules, sdk, None)  # as if the SDK were not installed
    monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(ImportError) as caught:
        importlib.import_module(name)
    message = str(caught.value)
    assert message == (f"{name} needs the [{extra}] extra: pip install 'todo-sessions[{extra}]'")
    assert "\n" not in message
