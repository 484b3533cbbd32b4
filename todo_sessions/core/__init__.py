"""The pure core: event models, validation and projections. No I/O, no clock, no randomness.

Implementation: its public names (`SessionEvent`, `SessionHeader`, `validate_event`,
`derive_messages`, ...) are exported from `todo_sessions`; import them from there.
"""

__all__: list[str] = []
