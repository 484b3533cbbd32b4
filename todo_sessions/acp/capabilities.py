"""What a client advertised in ``initialize``: the updates it may be sent (`ClientFeatures`).

The pinned Python SDK's schema (1.19) predates ``clientCapabilities.subagents`` and
``clientCapabilities.session.compaction`` and drops them when it validates the request, so
`todo_sessions.acp.connection.AgentConnection` hands the agent the raw JSON of the
capabilities too; `ClientFeatures.of` reads either form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ClientFeatures"]


def _present(value: Any) -> bool:
    """An advertised capability: an object (``{}`` included) or ``true``."""
    return isinstance(value, Mapping) or value is True


@dataclass(frozen=True, slots=True)
class ClientFeatures:
    """The newer updates a client opted into (all off: exactly the legacy stream).

    - ``plans`` (``clientCapabilities.plan``): ``plan_update`` / ``plan_removed`` instead of
      the legacy ``plan``;
    - ``compaction`` (``clientCapabilities.session.compaction``): ``compaction_update``;
    - ``subagents`` (``clientCapabilities.subagents``): ``subagent_update`` on the parent and
      the child's own updates on the child's session id.
    """

    plans: bool = False
    compaction: bool = False
    subagents: bool = False

    @classmethod
    def of(cls, capabilities: Any) -> ClientFeatures:
        """The features of ``clientCapabilities``: its JSON object, or the SDK's model."""
        if capabilities is None:
            return cls()
        if not isinstance(capabilities, Mapping):
            dump = getattr(capabilities, "model_dump", None)
            if dump is None:
                return cls()
            capabilities = dump(mode="json", by_alias=True, exclude_none=True)
        session = capabilities.get("session")
        return cls(
            plans=_present(capabilities.get("plan")),
            compaction=isinstance(session, Mapping) and _present(session.get("compaction")),
            subagents=_present(capabilities.get("subagents")),
        )
