"""The pure core: event models, validation and projections. No I/O, no clock, no randomness.

Implementation: its public names (`SessionEvent`, `SessionHeader`, `validate_event`,
`derive_messages`, ...) are exported from `todo_sessions`; import them from there.
"""

# Every type is registered before any module of the core is used: the registry is complete
# whoever reads it (the catalog registers its own types, the reference's vocabulary and the
# compaction records on import).
from . import catalog as _catalog  # noqa: F401

__all__: list[str] = []
