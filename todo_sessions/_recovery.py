"""Recovery files: events a `SessionService` could not store, kept instead of dropped.

When a live session's queued events still cannot be stored when the service closes (the
database stayed unreachable or locked past ``close_timeout``, or the lease was lost), they are
written to a recovery file in the JSONL export format (docs/format.md, "JSONL files"): the
header line, then the unstored events, which begin at the seq where the stored log ended
(not necessarily 0). `recover` appends such a file later, when the stored log still ends where
the file begins; otherwise it refuses and writes nothing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ._jsonl import event_lines, header_line, numbered_lines, parse_header_line
from .core.envelope import SessionEvent
from .core.header import SessionHeader
from .errors import InvalidEventError, SeqConflictError, SessionNotFoundError
from .store.store import SessionStore

__all__ = ["RecoveryResult", "default_recovery_dir", "recover", "write_recovery_file"]


def default_recovery_dir() -> Path:
    """``TODO_SESSIONS_RECOVERY_DIR``, else ``recovery/`` in the user's data directory."""
    env = os.environ.get("TODO_SESSIONS_RECOVERY_DIR")
    if env:
        return Path(env)
    from platformdirs import user_data_path

    return user_data_path("todo-sessions") / "recovery"


def write_recovery_file(
    directory: Path, header: SessionHeader, events: Sequence[SessionEvent]
) -> Path:
    """Write ``events`` (contiguous, not stored) to a new private file in ``directory``."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    first = events[0].seq if events else 0
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    safe_id = "".join(c if c.isalnum() or c in "-_." else "_" for c in header.id)[:80]
    base = f"{safe_id}.from-{first}.{stamp}"
    for n in range(1000):
        path = directory / (f"{base}.jsonl" if n == 0 else f"{base}.{n}.jsonl")
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(header_line(header) + "\n")
            for event in events:
                out.write(event.to_json() + "\n")
            out.flush()
            os.fsync(out.fileno())
        return path
    raise FileExistsError(f"{directory}: no free name for {base}.jsonl")


@dataclass(frozen=True)
class RecoveryResult:
    session_id: str
    first_seq: int
    events: int
    revision: str


def _parse(path: Path) -> tuple[SessionHeader, list[SessionEvent]]:
    with open(path, "rb") as lines:
        numbered = iter(list(numbered_lines(lines)))
    try:
        first = next(numbered, None)
        if first is None:
            raise InvalidEventError("line 1: empty file, expected a header line", field="line 1")
        header = parse_header_line(first[1])
        events = [event for _, event in event_lines(numbered, first_seq=None)]
    except InvalidEventError as exc:
        raise InvalidEventError(f"{path} {exc}", field=exc.field) from None
    if not events:
        raise InvalidEventError(f"{path}: the file holds no events: nothing to recover")
    return header, events


async def recover(store: SessionStore, path: str | os.PathLike[str]) -> RecoveryResult:
    """Append a recovery file's events to its session, all or nothing.

    Refused (`SeqConflictError`, nothing written) unless the stored log ends exactly where the
    file begins; a file beginning at seq 0 whose session was never stored creates it.
    """
    header, events = _parse(Path(path))
    first = events[0].seq
    try:
        await store.header(header.id)
    except SessionNotFoundError:
        if first != 0:
            raise SessionNotFoundError(
                header.id,
                f"the recovery file begins at seq {first} but no log of that session is stored",
            ) from None
        await store.create(header)
    try:
        revision = await store.append(header.id, events)
    except SeqConflictError as exc:
        raise SeqConflictError(
            header.id,
            first,
            exc.next_seq,
            detail=f"stored next seq is {exc.next_seq}: the stored log no longer ends where the "
            "recovery file begins; nothing was written",
        ) from exc
    return RecoveryResult(header.id, first, len(events), revision)
