"""The conformance corpus's files, kept in the repository (``tests/conformance/corpus/``).

The corpus (session logs, what the reference harness derives from each, its spec cases and
the judged differences; its README.md describes them) is test data of this project, so the
tests read this copy and need nothing outside the checkout. A file larger than
`GZIP_ABOVE` bytes is stored gzipped (``logs.jsonl`` as ``logs.jsonl.gz``, written with no
name and no time, so the same content always gives the same bytes); the others are stored
as they are.

The team keeps its copy in ``../shared/conformance`` beside the checkout (`TEAM_COPY`).
tests/test_conformance.py checks that ours holds exactly the same files when that folder is
there. To refresh ours from it (or from another folder)::

    python -m tests.conformance_files [SOURCE]
"""

from __future__ import annotations

import gzip
import os
import sys
from pathlib import Path

__all__ = [
    "CORPUS",
    "GZIP_ABOVE",
    "TEAM_COPY",
    "differences",
    "read_bytes",
    "refresh",
    "stored_files",
]

HERE = Path(__file__).resolve().parent
CORPUS = Path(os.environ.get("TODO_SESSIONS_CONFORMANCE", HERE / "conformance" / "corpus"))
"""The folder the tests read (``TODO_SESSIONS_CONFORMANCE`` names another one)."""
TEAM_COPY = HERE.parents[1] / "shared" / "conformance"
"""The team's copy, beside the checkout, where there is one."""
GZIP_ABOVE = 64 * 1024


def stored_files(folder: Path) -> dict[str, Path]:
    """The corpus files of ``folder``, by their name uncompressed (``logs.jsonl``)."""
    found: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and not path.name.startswith("."):
            name = path.name.removesuffix(".gz")
            if name in found:
                raise ValueError(f"{folder} holds {name} twice (plain and gzipped)")
            found[name] = path
    return found


def read_bytes(name: str, folder: Path = CORPUS) -> bytes:
    """The content of corpus file ``name`` (``logs.jsonl``), stored plain or gzipped."""
    plain = folder / name
    if plain.is_file():
        return plain.read_bytes()
    packed = folder / f"{name}.gz"
    if packed.is_file():
        return gzip.decompress(packed.read_bytes())
    raise FileNotFoundError(f"no conformance corpus file {name} (or {name}.gz) in {folder}")


def differences(source: Path, copy: Path) -> list[str]:
    """How ``copy`` differs from ``source`` (either may hold gzipped files): files missing
    on one side, and files whose content differs. Empty when they hold the same corpus."""
    theirs, ours = stored_files(source), stored_files(copy)
    found = [f"{name}: only in {source}" for name in sorted(theirs.keys() - ours.keys())]
    found += [f"{name}: only in {copy}" for name in sorted(ours.keys() - theirs.keys())]
    for name in sorted(theirs.keys() & ours.keys()):
        if read_bytes(name, source) != read_bytes(name, copy):
            found.append(f"{name}: differs")
    return found


def refresh(source: Path, copy: Path = CORPUS) -> list[str]:
    """Make ``copy`` hold the corpus of ``source``: each file written (gzipped when larger
    than `GZIP_ABOVE`), files ``source`` no longer has removed. Returns the names written."""
    theirs = stored_files(source)
    if "README.md" not in theirs:
        raise ValueError(f"{source} has no README.md: not a conformance corpus")
    copy.mkdir(parents=True, exist_ok=True)
    contents = {name: read_bytes(name, source) for name in theirs}
    written = []
    for name, content in contents.items():
        packed = len(content) > GZIP_ABOVE
        target = copy / (f"{name}.gz" if packed else name)
        data = gzip.compress(content, compresslevel=9, mtime=0) if packed else content
        if not target.is_file() or target.read_bytes() != data:
            target.write_bytes(data)
            written.append(target.name)
        (copy / (name if packed else f"{name}.gz")).unlink(missing_ok=True)
    for name, path in stored_files(copy).items():
        if name not in contents:
            path.unlink()
            written.append(f"-{path.name}")
    return written


if __name__ == "__main__":
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else TEAM_COPY
    changed = refresh(source)
    done = f"updated {', '.join(changed)} from" if changed else "already the same as"
    print(f"{CORPUS}: {done} {source}")
