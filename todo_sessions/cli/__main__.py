"""``python -m todo_sessions.cli`` runs the command line (as ``python -m todo_sessions`` does)."""

from . import main

main(prog_name="todo-sessions")
