"""The session configuration the bridge offers (``configOptions``): the model, and the
API key the models need (``authMethods``).

A ``model`` option (category ``model``, a select) whose values are the bridge's models in
the order they were configured (the first is the default). ``session/set_config_option``
switches a session's model for its next turn and records the choice in the log: a
``session/meta`` event whose ``metadata`` gains `MODEL_META_KEY` (the rest kept), so a
resume, a ``session/load`` and any reader of the log know which model each later turn used.
A session that never chose runs the default.

``authMethods``: one agent method per API key variable a configured model needs; its
``authenticate`` succeeds when the variable is set and answers ``auth_required`` naming the
variable otherwise (the bridge reads its key from its environment; the editor sets it there).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..harness.model import Model
from . import _sdk

__all__ = ["MODEL_CONFIG_ID", "MODEL_META_KEY", "ModelChoice", "ModelMenu"]

MODEL_CONFIG_ID = "model"
"""The ``configId`` of the model option."""
MODEL_META_KEY = "acpModel"
"""The session metadata key that records the model a session switched to."""
_AUTH_PREFIX = "env:"


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """One model the bridge offers: its option ``value`` (shown as ``name``, default the
    value), what makes it (called once per live session that runs it) and the environment
    variable holding its API key when it needs one (``key_env``)."""

    value: str
    factory: Callable[[], Model]
    name: str | None = None
    key_env: str | None = None


class ModelMenu:
    """The models offered, the first the default."""

    def __init__(self, choices: Sequence[ModelChoice]) -> None:
        if not choices:
            raise ValueError("at least one model is needed")
        values = [choice.value for choice in choices]
        if len(set(values)) != len(values) or not all(values):
            raise ValueError(f"model values must be unique and non-empty, got {values!r}")
        self.choices = {choice.value: choice for choice in choices}
        self.default = values[0]

    def current(self, metadata: Mapping[str, Any] | None) -> str:
        """The model a session runs: the one it switched to, if offered, else the default."""
        chosen = (metadata or {}).get(MODEL_META_KEY)
        return chosen if isinstance(chosen, str) and chosen in self.choices else self.default

    def options(self, current: str) -> list[Any]:
        """The config options with ``current`` selected (the SDK's models)."""
        option = {
            "id": MODEL_CONFIG_ID,
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": current,
            "options": [
                {"value": c.value, "name": c.name or c.value} for c in self.choices.values()
            ],
        }
        response = _sdk.SetSessionConfigOptionResponse.model_validate({"configOptions": [option]})
        return list(response.config_options)

    def check(self, config_id: str, value: Any) -> str:
        """``value`` when it is an offered model of the ``model`` option; else
        ``invalid_params`` naming what was wrong."""
        if config_id != MODEL_CONFIG_ID:
            raise _sdk.RequestError.invalid_params(
                {"message": f"unknown config option {config_id!r} (offered: {MODEL_CONFIG_ID!r})"}
            )
        if not isinstance(value, str) or value not in self.choices:
            raise _sdk.RequestError.invalid_params(
                {"message": f"model {value!r} is not offered (offered: {list(self.choices)})"}
            )
        return value

    # -- authentication -------------------------------------------------------------------------

    def key_envs(self) -> list[str]:
        """The API key variables the offered models need, in order, each once."""
        return list(dict.fromkeys(c.key_env for c in self.choices.values() if c.key_env))

    def auth_methods(self) -> list[Any]:
        """``authMethods``: one agent method per key variable (none if no model needs one)."""
        return [
            _sdk.AuthMethodAgent(
                id=f"{_AUTH_PREFIX}{env}",
                name=f"API key from {env}",
                description=f"Set {env} in the environment the agent is started with.",
            )
            for env in self.key_envs()
        ]

    def authenticate(self, method_id: str) -> None:
        """Succeed when the method's variable is set; ``auth_required`` naming it if not,
        ``invalid_params`` for a method not offered."""
        env = method_id[len(_AUTH_PREFIX) :] if method_id.startswith(_AUTH_PREFIX) else None
        if env is None or env not in self.key_envs():
            raise _sdk.RequestError.invalid_params(
                {"message": f"unknown auth method {method_id!r}"}
            )
        if not os.environ.get(env):
            raise _sdk.RequestError.auth_required(
                {"message": f"no API key: set {env} in the agent's environment", "variable": env}
            )
