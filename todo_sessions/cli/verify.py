"""``verify``: check one session, or the whole database."""

from __future__ import annotations

import itertools
import os
import sys
from contextlib import closing
from typing import IO, Any

import click
from rich.markup import escape

from .._integrity import VerifyReport, verify_all, verify_session
from .._jsonl import declared_chain, file_chain, file_chain_problem, parse_lines
from ..core.chain import derive_key
from ..core.verify import Problem, errors_of
from ..errors import TodoSessionsError
from ..store.store import SessionStore
from ._context import Context, echo_json, pass_ctx
from ._options import CHAIN_KEY_ENV, command, json_option
from .exporting import maybe_gunzip, utf8_lines

__all__ = ["verify_cmd"]


@command("verify")
@click.argument("session_id", required=False)
@click.option(
    "--key-env",
    metavar="VAR",
    help="Recompute the hash chain keyed with the secret in this environment variable "
    f"(default: ${CHAIN_KEY_ENV} when set, else a plain hash).",
)
@click.option(
    "--against",
    "against_file",
    type=click.File("rb"),
    help="An export of the session (its id: SESSION_ID or the file's): the stored chain must "
    "match the file's, so a log rewritten or cut short since the export is found.",
)
@json_option
@pass_ctx
def verify_cmd(
    ctx: Context,
    session_id: str | None,
    key_env: str | None,
    against_file: IO[bytes] | None,
    as_json: bool,
) -> None:
    """Check one session (or all): seqs, rows, payloads, structure, surface, answered calls,
    the hash chain. Changes nothing; exits 1 when anything is wrong."""
    options: dict[str, Any] = {}
    if key_env is not None:
        secret = os.environ.get(key_env)
        if not secret:
            ctx.fail(f"--key-env {key_env}: the environment variable {key_env} is not set")
        options["chain_key"] = secret
    against: dict[int, str] | None = None
    file_problem: Problem | None = None
    if against_file is not None:
        session_id, against, file_problem = _file_chain(ctx, against_file, session_id, options)

    async def work(store: SessionStore) -> VerifyReport:
        if session_id is not None:
            found = await verify_session(store, session_id, against=against)
            if file_problem is not None:
                found.insert(0, file_problem)
            return VerifyReport(sessions={session_id: found})
        return await verify_all(store)

    report = ctx.run(work, **options)
    bad = {sid: problems for sid, problems in report.sessions.items() if errors_of(problems)}
    if as_json:
        # {session id: [problems]}; problems of the database as a whole, when there are
        # any, under the empty key (no session id is empty).
        found = {"": report.database} if report.database else {}
        found.update(report.sessions)
        echo_json({sid: [_problem_json(p) for p in ps] for sid, ps in found.items()})
    else:
        _print_report(ctx, report, bad, whole=session_id is None)
    if not report.ok:
        sys.exit(1)


def _print_report(
    ctx: Context, report: VerifyReport, bad: dict[str, list[Problem]], *, whole: bool
) -> None:
    for p in report.database:
        ctx.out.print(f"[red]✗ database[/]: {escape(str(p))}", markup=True)
    for sid, problems in report.sessions.items():
        if sid in bad:
            ctx.out.print(f"[red]✗ {escape(sid)}[/]: {len(problems)} problem(s)", markup=True)
        elif problems:
            warned = f"[yellow]! {escape(sid)}[/]: {len(problems)} warning(s)"
            ctx.out.print(warned, markup=True)
        for p in problems:
            ctx.out.print(f"    {p}")
        if not problems:
            ctx.out.print(f"[green]✓ {escape(sid)}[/]", markup=True)
    checked = f"{len(report.sessions)} session(s) checked, {len(bad)} with problems"
    if whole:
        checked += f"; database check: {len(report.database) or 'no'} problem(s)"
    ctx.out.print(checked)


def _file_chain(
    ctx: Context, file: IO[bytes], session_id: str | None, options: dict[str, Any]
) -> tuple[str, dict[int, str], Problem | None]:
    """The session id, the chain values of an export file (by seq) and, when its events do
    not lead to the chain head its header line carries, that problem."""
    secret = options.get("chain_key", os.environ.get(CHAIN_KEY_ENV) or None)
    key = derive_key(secret) if secret else b""
    try:
        with closing(utf8_lines(maybe_gunzip(file))) as lines:
            first = next(lines, "")
            header, events = parse_lines(itertools.chain([first], lines))
    except TodoSessionsError as exc:
        ctx.fail(f"--against: {exc}")
    computed = file_chain(header, events, key)
    problem = file_chain_problem(declared_chain(first), computed)
    found = Problem(None, "chain", f"--against file: {problem}") if problem else None
    return session_id or header.id, computed, found


def _problem_json(problem: Problem) -> dict[str, Any]:
    out = {"seq": problem.seq, "kind": problem.kind, "message": problem.message}
    if problem.warning:
        out["warning"] = True
    return out
