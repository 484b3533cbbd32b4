"""Ownership leases: one live owner per session across processes, fenced appends."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from factories import header

from todo_sessions import (
    EventsNotStoredError,
    LeaseLostError,
    SessionEvent,
    SessionLeasedError,
    SessionService,
    SessionStore,
)

HERE = Path(__file__).resolve().parent


async def stored_session(url: str, session_id: str = "s") -> None:
    async with SessionStore(url) as store:
        await store.create(header(session_id))
        await store.append(session_id, [SessionEvent("request/context", 0, 1, {"n": 0})])


async def test_a_second_service_is_refused_unless_it_steals(shared_db_url: str) -> None:
    await stored_session(shared_db_url)
    first = SessionService(SessionStore(shared_db_url), owner="first-owner")
    second = SessionService(SessionStore(shared_db_url), owner="second-owner")
    try:
        mine = await first.resume("s")
        mine.append("request/context", {"by": "first", "n": 1})
        await first.flush("s")

        with pytest.raises(SessionLeasedError) as refused:
            await second.resume("s")
        assert refused.value.session_id == "s"
        assert "first-owner" in str(refused.value) and str(os.getpid()) in str(refused.value)
        assert refused.value.expires_at > 0 and "steal=True" in str(refused.value)

        theirs = await second.resume("s", steal=True)
        mine.append("request/context", {"by": "first", "n": 2})
        with pytest.raises(LeaseLostError, match="taken over by second-owner"):
            await first.flush("s")
        theirs.append("request/context", {"by": "second", "n": 2})
        await second.flush("s")

        path = await first.discard("s")
        assert path is not None
        saved = [json.loads(line) for line in path.read_text().splitlines()]
        assert saved[0]["header"]["id"] == "s"
        assert [(e["seq"], e["data"]) for e in saved[1:]] == [(2, {"by": "first", "n": 2})]
    finally:
        await first.aclose()
        await second.aclose()
    async with SessionStore(shared_db_url) as store:
        events = await store.read_from("s")
    assert [e.data.get("by") for e in events] == [None, "first", "second"]


async def test_an_expired_lease_is_taken_over_without_steal(shared_db_url: str) -> None:
    await stored_session(shared_db_url)
    async with SessionStore(shared_db_url) as other:
        ghost = await other.acquire_lease("s", "ghost-owner", ttl=0.05)
        await asyncio.sleep(0.1)
        async with SessionService(SessionStore(shared_db_url)) as service:
            session = await service.resume("s")  # no steal needed
            session.append("request/context", {"n": 1})
            await service.flush("s")
        with pytest.raises(LeaseLostError):  # the ghost's epoch is gone
            await other.append("s", [SessionEvent("request/context", 2, 1, {"n": 2})], lease=ghost)
        assert await other.count("s") == 2


async def test_a_lease_is_renewed_while_held(shared_db_url: str) -> None:
    await stored_session(shared_db_url)
    # renewed every ttl/3: a renewal may come 2/3 of a ttl late (a busy machine, other test
    # processes) before the lease lapses. The rival's store is opened first, so that its
    # opening (a migration check) is not part of the window either.
    async with (
        SessionStore(shared_db_url) as rival_store,
        SessionService(SessionStore(shared_db_url), lease_ttl=2.4) as service,
    ):
        session = await service.resume("s")
        await asyncio.sleep(8.0)  # more than three ttls: only renewal keeps it
        session.append("request/context", {"n": 1})
        await service.flush("s")
        rival = SessionService(rival_store)
        with pytest.raises(SessionLeasedError):
            await rival.resume("s")


async def test_an_expired_lease_fences_its_holder(shared_db_url: str) -> None:
    await stored_session(shared_db_url)
    async with SessionStore(shared_db_url) as store:
        lease = await store.acquire_lease("s", "slow-owner", ttl=0.05)
        await asyncio.sleep(0.1)
        with pytest.raises(LeaseLostError, match="expired"):
            await store.append("s", [SessionEvent("request/context", 1, 1, {})], lease=lease)
        with pytest.raises(LeaseLostError):
            await store.renew_lease(lease)
        assert await store.count("s") == 1


async def test_closing_gives_the_lease_back(shared_db_url: str) -> None:
    await stored_session(shared_db_url)
    async with SessionService(SessionStore(shared_db_url)) as first:
        await first.resume("s")
        await first.close("s")
        async with SessionService(SessionStore(shared_db_url)) as second:
            await second.resume("s")  # free again at once
            holders = await second.store.lease_holders(["s"])
            assert holders["s"].owner == second.owner
        async with SessionStore(shared_db_url) as store:
            assert await store.lease_holders(["s"]) == {}


async def test_a_lease_of_a_process_that_died_on_this_host_is_free(shared_db_url: str) -> None:
    await stored_session(shared_db_url)
    script = (
        "import asyncio, os, sys\n"
        "from todo_sessions import SessionStore\n"
        "async def main():\n"
        "    store = await SessionStore(sys.argv[1]).open()\n"
        "    await store.acquire_lease('s', 'crashed-owner', ttl=600)\n"
        "    os._exit(0)\n"
        "asyncio.run(main())\n"
    )
    command = [sys.executable, "-c", script, shared_db_url]
    await asyncio.to_thread(subprocess.run, command, check=True, timeout=60)
    async with SessionStore(shared_db_url) as store:
        holder = (await store.lease_holders(["s"]))["s"]
        assert holder.owner == "crashed-owner" and holder.pid != os.getpid()
    async with SessionService(SessionStore(shared_db_url)) as service:
        await service.resume("s")  # the holder's pid is gone: no steal needed


def test_two_processes_steal_and_fence(shared_db_url: str, tmp_path: Path) -> None:
    asyncio.run(stored_session(shared_db_url))
    ready, go = tmp_path / "ready", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    child = subprocess.Popen(
        [sys.executable, str(HERE / "lease_child.py"), shared_db_url, "s", str(ready), str(go)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        for _ in range(6000):
            if ready.exists() or child.poll() is not None:
                break
            asyncio.run(asyncio.sleep(0.01))
        assert ready.exists(), "the child never resumed the session"

        async def take_over() -> None:
            async with SessionService(SessionStore(shared_db_url)) as service:
                with pytest.raises(SessionLeasedError, match=f"pid {child.pid}"):
                    await service.resume("s")
                session = await service.resume("s", steal=True)
                go.write_text("go")
                await asyncio.sleep(0.5)  # the child tries its flush now
                session.append("request/context", {"by": "parent"})

        asyncio.run(take_over())
        out, _ = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    outcome = json.loads(out.strip().splitlines()[-1])
    assert outcome["flush"] == "LeaseLostError", outcome
    saved = Path(outcome["recovery"]).read_text().splitlines()
    assert json.loads(saved[1])["data"] == {"by": "child", "n": 2}

    async def stored() -> list[Any]:
        async with SessionStore(shared_db_url) as store:
            return [e.data for e in await store.read_from("s")]

    # the child's first event (before the steal) is stored; nothing of it after
    assert asyncio.run(stored()) == [{"n": 0}, {"by": "child", "n": 1}, {"by": "parent"}]


async def test_leases_can_be_turned_off(shared_db_url: str) -> None:
    await stored_session(shared_db_url)
    async with SessionService(SessionStore(shared_db_url), leases=False) as a:
        await a.resume("s")
        async with SessionService(SessionStore(shared_db_url), leases=False) as b:
            await b.resume("s")  # no lease: nothing refuses it (the seq check still guards)
        assert await a.store.lease_holders(["s"]) == {}


def test_events_not_stored_error_names_the_file() -> None:
    error = EventsNotStoredError("s", 3, "/tmp/x.jsonl", TimeoutError("db down"))
    assert "3 event(s)" in str(error) and "todo-sessions recover /tmp/x.jsonl" in str(error)


async def test_list_and_show_display_the_live_lease(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from todo_sessions.cli import main as cli

    url = f"sqlite:///{tmp_path}/s.db"
    await stored_session(url)
    await stored_session(url, "free")
    async with SessionService(SessionStore(url), owner="svc-a") as service:
        await service.resume("s")
        run = CliRunner().invoke
        listed = await asyncio.to_thread(run, cli, ["--db", url, "list", "--json"])
        rows = {row["id"]: row for row in json.loads(listed.stdout)}
        assert rows["s"]["lease"]["owner"] == "svc-a"
        assert rows["s"]["lease"]["pid"] == os.getpid()
        assert rows["free"]["lease"] is None
        table = await asyncio.to_thread(run, cli, ["--db", url, "list"])
        assert "live lease" in table.stdout and "svc-a" in table.stdout
        shown = await asyncio.to_thread(run, cli, ["--db", url, "show", "s"])
        assert "live: leased by owner svc-a" in shown.stdout
    after = await asyncio.to_thread(CliRunner().invoke, cli, ["--db", url, "show", "s"])
    assert "leased" not in after.stdout  # given back at close
