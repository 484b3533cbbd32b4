"""Files in and out: ``export``, ``import`` and ``recover``."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Callable, Generator, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import IO, Any, cast

import click

from .._filecheck import MAX_BYTES, MAX_EVENTS
from .._jsonl import ImportResult, export_lines, parse_lines, reference_lines
from .._jsonout import escape_controls
from .._recovery import recover
from ..core.header import SessionHeader
from ..errors import InvalidEventError, SessionExistsError
from ..store.store import SessionStore
from ._context import Context, pass_ctx
from ._options import BYTES, COUNT, command
from ._render import safe

__all__ = ["MAX_LINE_BYTES", "export_cmd", "import_cmd", "recover_cmd", "utf8_lines"]


@contextmanager
def _sink(output: Path | None) -> Iterator[IO[str]]:
    """stdout (``output`` None or ``-``), or a temporary file renamed to ``output`` only once
    the export is complete (a failed export never leaves a truncated file that would import as
    a shorter session)."""
    if output is None or str(output) == "-":
        yield sys.stdout
        return
    try:
        fd, part = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".part", dir=output.parent)
    except OSError as exc:
        raise OSError(f"cannot write {output}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as sink:
            yield sink
        os.replace(part, output)
    except BaseException:
        Path(part).unlink(missing_ok=True)
        raise


@command("export")
@click.argument("session_id")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="File to write (default, or -: stdout).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["todo-sessions", "reference"]),
    default="todo-sessions",
    show_default=True,
    help="reference: the reference harness's session file (its header, chunk rows).",
)
@pass_ctx
def export_cmd(ctx: Context, session_id: str, output: Path | None, fmt: str) -> None:
    """Export a session as JSONL: a header line, then one event per line."""

    async def work(store: SessionStore) -> int:
        total = (await store.summary(session_id)).next_seq
        lines = reference_lines if fmt == "reference" else export_lines
        with ctx.progress("export", total) as advance, _sink(output) as sink:
            count = 0
            async for line in lines(store, session_id, progress=advance):
                sink.write(escape_controls(line) + "\n")
                count += 1
        return total if fmt == "reference" else count - 1

    count = ctx.run(work)
    if output is not None and str(output) != "-":
        ctx.err.print(f"exported {count} events of {session_id} to {output}")


_UNDECODABLE = re.compile("[\udc80-\udcff]")
"""What ``surrogateescape`` makes of a byte that is not UTF-8 (text never holds these)."""


MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line ``import`` reads by default (64 MiB); ``--max-line-bytes`` changes it."""

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
"""How a Zstandard frame begins: the reference harness stores its session files so by default
(``session.jsonl.zstd``, concatenated frames)."""


def utf8_lines(file: IO[bytes], max_line: int = MAX_LINE_BYTES) -> Generator[str, None, None]:
    """The lines of ``file`` decoded as UTF-8 (``\n`` or ``\r\n`` ends a line), or
    `InvalidEventError` naming the first line that is not UTF-8 (its column and the byte) or
    is longer than ``max_line`` bytes (never read whole: memory stays bounded)."""
    number = 0
    while True:
        raw = file.readline(max_line + 1)
        if not raw:
            return
        number += 1
        if number == 1 and raw.startswith(_ZSTD_MAGIC):
            raise InvalidEventError(
                "line 1: the file is Zstandard-compressed (as the reference harness stores "
                "session.jsonl.zstd by default); decompress it first: "
                "zstd -dc FILE | todo-sessions import -",
                field="line 1",
            )
        body = raw.removesuffix(b"\n").removesuffix(b"\r")
        if len(body) > max_line:
            raise InvalidEventError(
                f"line {number} is longer than {max_line} bytes (the limit; "
                "--max-line-bytes raises it)",
                field=f"line {number}",
            )
        line = raw.decode("utf-8", "surrogateescape")
        bad = _UNDECODABLE.search(line)
        if bad is not None:
            byte = ord(bad.group()) - 0xDC00
            column = bad.start() + 1
            message = f"line {number}: not UTF-8 text (byte 0x{byte:02x} at column {column})"
            raise InvalidEventError(message, field=f"line {number}")
        yield line.removesuffix("\r\n") + "\n" if line.endswith("\r\n") else line


@command("import")
@click.argument("file", type=click.File("rb"))
@click.option("--as", "as_id", help="Store under this id instead of the exported one.")
@click.option(
    "--max-line-bytes",
    type=BYTES,
    default=MAX_LINE_BYTES,
    show_default=True,
    help="Refuse a file with a line longer than this (nothing is written).",
)
@click.option(
    "--max-bytes",
    type=BYTES,
    default=MAX_BYTES,
    show_default=True,
    help="Refuse a file holding more than this, decompressed (nothing is written).",
)
@click.option(
    "--max-events",
    type=COUNT,
    default=MAX_EVENTS,
    show_default=True,
    help="Refuse a file holding more events than this (nothing is written).",
)
@pass_ctx
def import_cmd(
    ctx: Context,
    file: IO[bytes],
    as_id: str | None,
    max_line_bytes: int,
    max_bytes: int,
    max_events: int,
) -> None:
    """Import a JSONL export, plain or gzipped (a `prune` archive), validated completely
    before anything is written."""
    file = maybe_gunzip(file)
    limits = {"max_bytes": max_bytes, "max_events": max_events}

    async def work(store: SessionStore) -> ImportResult:
        with ctx.progress("import", None) as advance:
            try:
                with closing(utf8_lines(file, max_line_bytes)) as lines:
                    return await _import_verified(store, lines, as_id, advance, limits)
            except SessionExistsError as exc:
                exc.args = (f"{exc}; import it under another id with --as NEW_ID",)
                raise

    result = ctx.run(work)
    ctx.out.print(f"imported {result.events} events as session {result.session_id}")


def maybe_gunzip(file: IO[bytes]) -> IO[bytes]:
    """The file itself, or its decompressed content when it starts with gzip's magic."""
    import gzip
    import io

    buffered: Any = file if hasattr(file, "peek") else io.BufferedReader(cast(Any, file))
    if buffered.peek(2)[:2] == b"\x1f\x8b":
        return cast(IO[bytes], gzip.GzipFile(fileobj=buffered, mode="rb"))
    return cast(IO[bytes], buffered)


async def _import_verified(
    store: SessionStore,
    lines: Iterator[str],
    as_id: str | None,
    progress: Callable[[int], None] | None,
    limits: dict[str, int] | None = None,
) -> ImportResult:
    """`jsonl.import_lines` with the command line's limits: every line is checked by the rules
    of ``verify`` (`parse_lines`) before anything is written, so ``import`` accepts exactly what
    ``verify`` accepts. A last turn left open is accepted (``verify`` warns that `load` closes
    it): an export of an interrupted session imports."""
    header, events = parse_lines(lines, progress=progress, chain_of=store, **(limits or {}))
    if as_id is not None:
        header = header.model_copy(update={"id": SessionHeader(id=as_id, created_at=0).id})
    if not events:
        raise InvalidEventError("the export holds no events: nothing to import")
    await store.create(header)  # as `import_lines` does, without parsing the lines again
    revision = await store.append(header.id, events)
    return ImportResult(header.id, len(events), revision)


@command("recover")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@pass_ctx
def recover_cmd(ctx: Context, file: Path) -> None:
    """Append a recovery file (events a service could not store) to its session.

    Refused, with nothing written, unless the stored log still ends where the file begins."""

    async def work(store: SessionStore) -> Any:
        return await recover(store, file)

    result = ctx.run(work)
    last = result.first_seq + result.events - 1
    ctx.out.print(
        f"recovered {result.events} events (seq {result.first_seq}-{last}) of session "
        f"{safe(result.session_id)}"
    )
