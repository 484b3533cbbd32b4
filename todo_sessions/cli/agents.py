"""Other agents' sessions: ``import --from AGENT [PATH...]`` (and ``--follow``) and ``export
--format AGENT``, over `todo_sessions.importers` (the commands themselves are in `exporting`).

``import --from`` prints one line per session it created or grew, warnings (``warning:
<file>:<line>: …``: a skipped line, an entry kind this version does not know, reported once per
file) and errors (``error: …``: a PATH that is not there or holds no line in the agent's
format, a file rewritten since its import, a session id taken) on stderr, then a summary; exit
status 1 when any error was printed. The agents are those `importers.get_importer` knows (a
third agent registers there: nothing here names one).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import click

from ..importers import FileResult, Importer, export_session, get_importer, import_paths
from ..importers.follow import follow
from ..store.store import SessionStore
from ._context import Context
from ._options import UsageError
from ._render import safe

__all__ = ["export_agent", "import_agent", "importer_of"]

_ERRORS = ("error", "rewritten", "conflict")
_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_PARTIAL = "skipped for now"


def importer_of(agent: str) -> Importer:
    """The agent's importer; an unknown agent is a usage error (exit status 2), one this
    installation cannot load (a missing extra) an error (exit status 1)."""
    from ..importers import agents

    if agent not in agents():
        expected = ", ".join(agents())
        raise UsageError(f"--from/--format: unknown agent {agent!r}: expected one of {expected}")
    try:
        return get_importer(agent)
    except ValueError as exc:
        click.echo(f"error: {safe(str(exc))}", err=True)
        sys.exit(1)


@dataclass
class _Report:
    """What the passes of one ``import --from`` printed, so that nothing is said twice."""

    agent: str
    follow: bool
    said: set[str] = field(default_factory=set)
    partial: dict[Path, str] = field(default_factory=dict)
    """Following: the warning of a file's last line still being written, printed only if it
    is still so at the end (the agent is writing it)."""
    sessions: dict[str, str] = field(default_factory=dict)
    lines: int = 0
    errors: int = 0

    def __call__(self, results: list[FileResult]) -> None:
        for result in results:
            self._one(result)

    def _say(self, text: str) -> None:
        if text not in self.said:
            self.said.add(text)
            click.echo(safe(text), err=True)

    def _one(self, result: FileResult) -> None:
        if result.status in _ERRORS:
            self.errors += 1
            self._say(f"error: {result.message}")
            return
        self.partial.pop(result.path, None)
        for warning in result.warnings:
            if self.follow and _PARTIAL in warning:
                self.partial[result.path] = warning
            else:
                self._say(f"warning: {warning}")
        for kind, line in sorted(result.unknown_kinds.items(), key=lambda kv: kv[1]):
            key = f"{result.path}: unknown {kind}"
            if key not in self.said:
                self.said.add(key)
                text = f"{result.path}:{line}: entry kind {kind!r} unknown to this version "
                click.echo(safe(f"warning: {text}(kept whole, imported as ignorable)"), err=True)
        if result.status in ("created", "appended"):
            self.sessions.setdefault(result.session_id, result.status)
            self.lines += result.lines
            what = "new session" if result.status == "created" else "appended to"
            click.echo(safe(f"{what} {result.session_id}: {result.lines} lines from {result.path}"))

    def finish(self) -> None:
        for warning in self.partial.values():
            self._say(f"warning: {warning}")
        created = sum(1 for s in self.sessions.values() if s == "created")
        click.echo(
            f"imported {self.lines} {self.agent} lines: {created} new sessions, "
            f"{len(self.sessions) - created} grown"
        )


def _check_paths(importer: Importer, paths: tuple[str, ...], follow: bool) -> list[Path] | None:
    """The paths to import (None: the agent's default location); a PATH that is not there is
    an error (the default location too, unless following: the agent may create it)."""
    if not paths:
        missing = [p for p in importer.default_paths() if not p.exists()]
        if missing and not follow:
            where = ", ".join(map(str, missing))
            click.echo(
                f"error: no {importer.name} sessions: {safe(where)} does not exist", err=True
            )
            sys.exit(1)
        return None
    found = [Path(p) for p in paths]
    for path in found:
        if not path.exists():
            click.echo(f"error: {safe(str(path))}: no such file or directory", err=True)
            sys.exit(1)
    return found


def import_agent(
    ctx: Context,
    agent: str,
    paths: tuple[str, ...],
    *,
    follow_: bool,
    interval: float,
    max_line_bytes: int,
) -> None:
    """``import --from AGENT [PATH...] [--follow]`` (see the module docstring)."""
    importer = importer_of(agent)
    roots = _check_paths(importer, paths, follow_)
    report = _Report(agent, follow_)

    async def once(store: SessionStore) -> None:
        report(await import_paths(store, importer, roots, max_line_bytes=max_line_bytes))

    async def following(store: SessionStore) -> None:
        stop = asyncio.Event()
        with _stopped_by_signals(stop):
            if early.is_set():  # a signal while the store opened
                stop.set()
            await follow(
                store,
                importer,
                roots,
                stop=stop,
                report=report,
                interval=interval,
                max_line_bytes=max_line_bytes,
            )

    early = threading.Event()
    if follow_:
        previous = {s: signal.signal(s, lambda *_: early.set()) for s in _SIGNALS}
        where = ", ".join(str(p) for p in (roots or importer.default_paths()))
        click.echo(safe(f"following {agent} sessions in {where} (Ctrl-C stops)"), err=True)
        try:
            ctx.run(following)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    else:
        ctx.run(once)
    report.finish()
    if report.errors:
        sys.exit(1)


@contextmanager
def _stopped_by_signals(stop: asyncio.Event) -> Iterator[None]:
    """SIGINT and SIGTERM set ``stop`` while following (the command owns its process): the
    pass under way finishes, one more runs, the command reports and exits 0."""
    loop = asyncio.get_running_loop()
    installed = []
    for sig in _SIGNALS:
        with suppress(NotImplementedError, RuntimeError):  # not on this platform / thread
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


@contextmanager
def _binary_sink(output: Path | None) -> Iterator[IO[bytes]]:
    """stdout's bytes, or a temporary file renamed to ``output`` once complete."""
    if output is None or str(output) == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    try:
        fd, part = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".part", dir=output.parent)
    except OSError as exc:
        raise OSError(f"cannot write {output}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as sink:
            yield sink
        os.replace(part, output)
    except BaseException:
        Path(part).unlink(missing_ok=True)
        raise


def export_agent(ctx: Context, agent: str, session_id: str, output: Path | None) -> None:
    """``export --format AGENT SESSION``: the session in the agent's own format (for a JSONL
    agent the file's complete lines, byte for byte)."""
    importer = importer_of(agent)

    async def work(store: SessionStore) -> bytes:
        return await export_session(store, importer, session_id)

    data = ctx.run(work)
    with _binary_sink(output) as sink:
        sink.write(data)
    if output is not None and str(output) != "-":
        ctx.err.print(f"exported {session_id} as {agent} ({len(data)} bytes) to {output}")
