"""Looking after the database: ``migrate``, ``reindex`` and ``prune``."""

from __future__ import annotations

from pathlib import Path

import click

from ..store.migrate import migrate as run_migrate
from ..store.results import PruneReport
from ..store.store import SessionStore
from ._context import Context, echo_json, pass_ctx
from ._options import NATURAL, UsageError, command, json_option
from ._render import safe

__all__ = ["migrate_cmd", "prune_cmd", "reindex_cmd"]


@command("migrate")
@pass_ctx
def migrate_cmd(ctx: Context) -> None:
    """Create or upgrade the database schema to the newest revision."""
    ctx.run_async(run_migrate(ctx.db, schema=ctx.schema, table_prefix=ctx.table_prefix))
    ctx.out.print(f"database is at the newest schema: {ctx.location()}")


@command("reindex")
@click.option(
    "--search-config",
    "search_config",
    metavar="NAME",
    help="PostgreSQL: build the index with this text search configuration from now on "
    "(simple, english, german ...; default: keep the current one).",
)
@pass_ctx
def reindex_cmd(ctx: Context, search_config: str | None) -> None:
    """Rebuild the search index from the stored logs (derived data: nothing else changes)."""

    async def rebuild(store: SessionStore) -> tuple[int, str | None]:
        return await store.reindex(search_config=search_config), await store.search_config()

    rows, config = ctx.run(rebuild)
    shown = f" (PostgreSQL text search configuration {config})" if config else ""
    ctx.out.print(f"search index rebuilt: {rows} row(s){shown}")


@command("prune")
@click.option(
    "--older-than",
    "older_than",
    metavar="AGE",
    help="Sessions last active more than AGE ago: 30m, 12h, 90d, 2w.",
)
@click.option("--keep-last", type=NATURAL, help="Keep the N newest.")
@click.option("--tag", metavar="TAG", help="Only sessions with this tag.")
@click.option(
    "--archive",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for the archives (<id>.jsonl.gz, the export); required to delete.",
)
@click.option(
    "--keep-checkpoints",
    type=NATURAL,
    help="Of every kept session, delete the checkpoints older than its newest N.",
)
@click.option("--dry-run", is_flag=True, help="Change nothing; list what would be done.")
@json_option
@pass_ctx
def prune_cmd(
    ctx: Context,
    older_than: str | None,
    keep_last: int | None,
    tag: str | None,
    archive: Path | None,
    keep_checkpoints: int | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Archive, then delete, old sessions (never one with a live lease); each archive is
    verified against the database before its session is deleted. `import` reads them back."""
    age = None
    if older_than is not None:
        from ..core.moments import parse_duration

        try:
            age = parse_duration(older_than)
        except ValueError as exc:
            raise UsageError(f"--older-than {exc}") from None
    if age is None and keep_last is None and keep_checkpoints is None:
        raise UsageError("give --older-than, --keep-last or --keep-checkpoints")
    if (age is not None or keep_last is not None) and archive is None:
        raise UsageError("--archive DIR is required: sessions are deleted only once archived")

    report = ctx.run(
        lambda store: store.prune(
            older_than=age,
            keep_last=keep_last,
            tag=tag,
            dry_run=dry_run,
            archive=archive,
            keep_checkpoints=keep_checkpoints,
        )
    )
    if as_json:
        echo_json(report.to_dict())
    else:
        _print_pruned(ctx, report, dry_run=dry_run, checkpoints=keep_checkpoints is not None)


def _print_pruned(ctx: Context, report: PruneReport, *, dry_run: bool, checkpoints: bool) -> None:
    verb = "would archive and delete" if dry_run else "archived and deleted"
    done = report.selected if dry_run else report.deleted
    for sid in done:
        where = f" -> {report.archived[sid]}" if sid in report.archived else ""
        ctx.out.print(f"{verb} {safe(sid)}{safe(where)}")
    for sid in report.leased:
        ctx.out.print(f"skipped {safe(sid)}: a live lease holds it", style="yellow")
    count = len([s for s in done if s not in report.leased])
    summary = f"{verb} {count} session(s)"
    if checkpoints:
        summary += f"; {'would delete' if dry_run else 'deleted'} "
        summary += f"{report.checkpoints_deleted} checkpoint(s)"
    ctx.out.print(summary)
