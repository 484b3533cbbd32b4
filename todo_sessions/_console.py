"""The ``todo-sessions`` console script.

The command line imports most of the library; an interrupt (Ctrl-C) during those imports must
end the program the way one during a command does (one line, exit status 130), so the import
happens here, inside the handling. This module itself imports nothing heavy.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    try:
        from .cli import main as cli_main
    except KeyboardInterrupt:
        if "--debug" in sys.argv[1:]:
            raise
        sys.stderr.write("error: interrupted\n")
        raise SystemExit(130) from None
    cli_main()
