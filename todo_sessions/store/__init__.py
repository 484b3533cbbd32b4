"""The only code that touches a database: schema, engines, migrations, the store.

Implementation: its public names (`SessionStore`, `Namespace`, `migrate`, ...) are exported
from `todo_sessions`; import them from there. The modules here may change without notice.
"""

__all__: list[str] = []
