"""``python -m todo_sessions`` runs the command line."""

from .cli import main

main()
