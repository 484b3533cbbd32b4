"""``python -m todo_sessions`` runs the command line."""

from ._console import main

main()
