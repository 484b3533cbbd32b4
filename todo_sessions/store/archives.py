"""The files `prune` writes: where a session's archive goes, and how it is written and read
without trusting the archive directory (docs/design.md, "Retention").

Names. An id made of lowercase ASCII letters, digits, ``-``, ``_`` and ``.`` (not first or
last), at most 100 characters and not a device name of Windows, is its own file name:
``<id>.jsonl.gz`` (as archives were always named). Any other id is written as
``<readable>~<hash>.jsonl.gz``: ``readable`` is up to 40 characters of it, lowercased, with
every other character as ``_``, and ``hash`` 32 hex digits of BLAKE2b over the id's UTF-8.
Plain names never hold ``~`` and both kinds are lowercase ASCII of at most 109 bytes, so two
ids never share a name, also on a file system that ignores case (or normalises Unicode) or
limits names to 255 bytes. The session id inside the file (its header line) is the truth: a
file at a session's name holding another session is never overwritten nor reused.

An id of the other kind archived before this naming has its archive at the percent-encoded
name (`legacy_archive_path`): prune still reuses it when it reads back as the session's
export, and `todo-sessions import` reads either.

Safety. Files are created 0600 (the directory, when prune creates it, 0700), as the
database's. Nothing in the directory is followed: the temporary file is created with
``O_EXCL | O_NOFOLLOW`` after removing whatever had its name (a symlink is removed, not
followed); an archive is opened with ``O_NOFOLLOW | O_NONBLOCK`` and read only if it is a
regular file (a FIFO never blocks); a directory in the way is a clean `StoreError`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import AsyncIterator
from contextlib import suppress
from hashlib import blake2b
from pathlib import Path
from typing import IO
from urllib.parse import quote

from ..errors import StoreError

__all__ = [
    "ARCHIVE_SUFFIX",
    "archive_path",
    "legacy_archive_path",
    "open_regular",
    "write_archive",
]

ARCHIVE_SUFFIX = ".jsonl.gz"
_PLAIN = re.compile(r"[a-z0-9_-](?:[a-z0-9._-]{0,98}[a-z0-9_-])?")
_OTHER = re.compile(r"[^a-z0-9._-]")
_DEVICES = {"con", "prn", "aux", "nul"} | {f"{d}{n}" for d in ("com", "lpt") for n in range(10)}
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_BINARY = getattr(os, "O_BINARY", 0)


def archive_path(directory: str | os.PathLike[str], session_id: str) -> Path:
    """Where `prune` archives a session (module docstring, "Names")."""
    if _PLAIN.fullmatch(session_id) and session_id.split(".")[0] not in _DEVICES:
        return Path(directory) / f"{session_id}{ARCHIVE_SUFFIX}"
    readable = _OTHER.sub("_", session_id.lower()[:40]).lstrip(".") or "_"
    digest = blake2b(session_id.encode("utf-8"), digest_size=16).hexdigest()
    return Path(directory) / f"{readable}~{digest}{ARCHIVE_SUFFIX}"


def legacy_archive_path(directory: str | os.PathLike[str], session_id: str) -> Path:
    """Where archives were written before `archive_path`'s naming: the id percent-encoded
    (not unique where case is ignored, and too long for some ids)."""
    name = quote(session_id, safe="-_.")
    if name.startswith("."):
        name = "%2E" + name[1:]
    return Path(directory) / f"{name}{ARCHIVE_SUFFIX}"


def make_directory(directory: Path) -> None:
    """The archive directory, created 0700 when missing (an existing one is left as it is)."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:
        raise StoreError(
            f"the archive directory {directory} exists and is not a directory"
        ) from None


def open_regular(path: Path) -> IO[bytes] | None:
    """``path`` opened for reading when it is a regular file (never through a symlink, never
    blocking on a FIFO), else None: nothing there, or something that is not an archive."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _BINARY)
    except OSError:  # missing, a symlink (ELOOP), unreadable, a directory on some systems
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        private = getattr(os, "fchmod", None)  # (not on Windows before Python 3.13)
        if private is not None:
            with suppress(OSError):  # an archive written 0644 by an earlier version
                private(fd, 0o600)
        return os.fdopen(fd, "rb")
    except BaseException:
        with suppress(OSError):
            os.close(fd)
        raise


def _check_not_directory(path: Path) -> bool:
    """Whether anything has ``path``'s name; a directory (not a symlink to one) is a
    `StoreError`."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(found.st_mode):
        raise StoreError(
            f"{path} is a directory, in the way of an archive: remove it (nothing was deleted)"
        )
    return True


def _clear(path: Path) -> None:
    """Remove what has ``path``'s name (a file, a symlink, a FIFO: the entry, not a target);
    a directory there is a `StoreError`."""
    if _check_not_directory(path):
        with suppress(FileNotFoundError):
            os.unlink(path)


async def write_archive(path: Path, lines: AsyncIterator[bytes]) -> None:
    """Write ``lines`` gzipped to ``path`` durably: to ``<path>.tmp`` (0600, created
    exclusively, never through a symlink), fsynced, renamed into place (replacing the entry
    there, never a target), the directory fsynced."""
    import gzip

    temporary = path.with_name(path.name + ".tmp")
    _clear(temporary)
    _check_not_directory(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _BINARY
    try:
        fd = os.open(temporary, flags, 0o600)
    except FileExistsError:
        raise StoreError(f"{temporary} appeared while prune wrote it (another prune?)") from None
    try:
        with os.fdopen(fd, "wb") as raw:
            # mtime 0 and no file name: the same session always gives the same bytes
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed:
                async for line in lines:
                    packed.write(line)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise
    fsync_directory(path.parent)


def fsync_directory(directory: Path) -> None:
    if os.name == "nt":  # no directory handles to fsync there
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
