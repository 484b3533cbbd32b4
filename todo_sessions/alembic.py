"""Hooks for a host application's own alembic environment (README.md, "Your own alembic").

In the host's ``env.py``: `migrate_on` migrates our tables on the host's connection (before or
after the host's own migrations; our history keeps its own version table), and
`alembic_include_object` / `alembic_include_name` keep ``alembic revision --autogenerate`` and
``alembic check`` away from our tables. `metadata` is our tables' ``MetaData`` in the default
namespace (``Namespace(...).metadata`` in another).

Importing this module loads alembic and SQLAlchemy; ``import todo_sessions`` does not.
"""

from .store.migrate import alembic_include_name, alembic_include_object, migrate_on
from .store.schema import metadata

__all__ = ["alembic_include_name", "alembic_include_object", "metadata", "migrate_on"]
