"""``search``: what was said in every session."""

from __future__ import annotations

from typing import Any

import click
from rich.text import Text

from ..store.results import SearchHit
from ..store.store import SessionStore
from ._context import Context, echo_json, iso, pass_ctx
from ._options import COUNT, MOMENT, SEARCH_COUNT, SEARCH_KINDS, command, json_option
from ._render import safe

__all__ = ["search_cmd"]

SEARCH_LIMIT = 20


def hit_json(hit: SearchHit) -> dict[str, Any]:
    return hit.to_dict()


def _marked(hit: SearchHit) -> Text:
    """The snippet with its matched words in bold (rich Text: never read as markup)."""
    text = Text(safe(hit.snippet))
    for start, end in hit.marks:
        text.stylize("bold yellow", start, end)
    return text


@command("search")
@click.argument("query")
@click.option(
    "--limit", type=SEARCH_COUNT, default=SEARCH_LIMIT, show_default=True, help="Hits per page."
)
@click.option("--before", "before_id", type=COUNT, help="Show the page after this index id.")
@click.option("--cwd", metavar="PATH", help="Only sessions started in this directory.")
@click.option("--tag", metavar="TAG", help="Only sessions with this tag.")
@click.option("--since", type=MOMENT, help="Only sessions active at or after WHEN (as list).")
@click.option("--until", type=MOMENT, help="Only sessions last active before WHEN (as list).")
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(SEARCH_KINDS),
    help="Search only this kind of text (repeatable; default: all but reasoning).",
)
@json_option
@pass_ctx
def search_cmd(
    ctx: Context,
    query: str,
    limit: int,
    before_id: int | None,
    kinds: tuple[str, ...],
    as_json: bool,
    **filters: Any,
) -> None:
    """Search what was said in every session: words that must all occur, "a phrase",
    prefix*, -excluded. Newest first."""

    async def work(store: SessionStore) -> list[SearchHit]:
        before = None
        if before_id is not None:  # only its index id matters for paging
            before = SearchHit("", None, 0, "", "", "", (), None, before_id)
        return await store.search(query, **filters, kinds=kinds or None, limit=limit, before=before)

    hits = ctx.run(work)
    if as_json:
        echo_json([hit_json(h) for h in hits])
        return
    if not hits:
        ctx.out.print("no matches")
        return
    for hit in hits:
        where = f"{hit.session_id} seq {hit.seq} ({hit.kind}"
        where += ", no longer in the model's history)" if hit.in_history is False else ")"
        title = f" {hit.title}" if hit.title else ""
        ctx.out.print(Text(safe(where), "bold") + Text(safe(title), "dim"))
        ctx.out.print(Text("    ") + _marked(hit))
    if len(hits) == limit:
        more = _search_options(limit, kinds, filters)
        hint = ctx.hint("search", query, *more, "--before", str(hits[-1].index_id))
        ctx.out.print(f"next page: {safe(hint)}", style="dim")


def _search_options(limit: int, kinds: tuple[str, ...], filters: dict[str, Any]) -> list[str]:
    """The options of ``search`` that give the same query again (for the next page's hint)."""
    more = ["--limit", str(limit)] if limit != SEARCH_LIMIT else []
    for option in ("cwd", "tag"):
        if filters[option] is not None:
            more += [f"--{option}", filters[option]]
    for option in ("since", "until"):
        if filters[option] is not None:
            more += [f"--{option}", iso(filters[option])]
    for kind in kinds:
        more += ["--kind", kind]
    return more
