"""Event vocabularies register from the side of the code that writes them (issue #35): the core's
catalog holds the log format's own types; the SDK session backends' types (``claude/entry``,
``agents/*``), the importers' (``codex/entry``, ``import/verbatim``) and other distributions'
(entry points of ``todo_sessions.vocabularies``) load the first time a process meets a type it
does not know (docs/format.md, "Your own event types").

So a fresh interpreter that imports only ``todo_sessions`` (never the integrations nor the
importers) verifies, shows, exports and imports a database of every adapter's sessions exactly
as a process that imported every vocabulary first (the registry as complete as the core's
catalog used to make it): the same output, the same exit status, the same payload errors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from todo_sessions import SessionEvent, SessionHeader, SessionStore
from todo_sessions.importers import get_importer, import_paths
from todo_sessions.integrations.claude_agent_sdk import TodoSessionsStore
from todo_sessions.integrations.openai_agents import TodoSessionsSession

pytestmark = pytest.mark.slow  # every case starts interpreters (about a second of imports each)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "importers"
CLAUDE_ROOT, CODEX_ROOT = FIXTURES / "claude-code" / "projects", FIXTURES / "codex" / "sessions"
ADAPTER_TYPES = [
    "agents/item",
    "agents/retract",
    "claude/entry",
    "codex/entry",
    "import/verbatim",
    "opencode/message",
    "opencode/session",
]
T0 = 1_764_000_000_000

CLI = "import sys\nsys.argv[0] = 'todo-sessions'\nfrom todo_sessions._console import main\nmain()\n"
EVERY_VOCABULARY = (
    "import todo_sessions.integrations._vocabulary, todo_sessions.importers._vocabulary\n"
)
"""What a process had registered before the command ran, as the core's catalog did it."""


def python(code: str, *args: str, path: tuple[Path, ...] = ()) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter running ``code`` with this tree (and ``path``) importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TODO_SESSIONS_")}
    env["PYTHONPATH"] = os.pathsep.join([*map(str, path), str(ROOT)])
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def outcome(done: subprocess.CompletedProcess[str]) -> tuple[int, str, str]:
    return done.returncode, done.stdout, done.stderr


def test_the_core_lists_no_adapter_type_until_the_vocabularies_load() -> None:
    code = textwrap.dedent(
        f"""
        import json, sys
        import todo_sessions
        from todo_sessions import EVENT_TYPES
        adapters = {ADAPTER_TYPES!r}
        before = [n for n in adapters if n in EVENT_TYPES]
        models = [e.model.__module__ for e in EVENT_TYPES.values()]
        core = all(m.startswith("todo_sessions.core.") for m in models)
        bridges = sorted(m for m in sys.modules if m.startswith(("todo_sessions.integrations",
            "todo_sessions.importers", "todo_sessions.harness")))
        loaded = todo_sessions.load_vocabularies()
        after = {{n: [EVENT_TYPES[n].model.__module__, EVENT_TYPES[n].surface] for n in adapters}}
        print(json.dumps([before, core, bridges, loaded, after]))
        """
    )
    done = python(code)
    assert done.returncode == 0, done.stderr
    before, core, bridges, loaded, after = json.loads(done.stdout)
    assert before == [] and core and bridges == []
    assert loaded == [
        "todo_sessions.integrations._vocabulary",
        "todo_sessions.importers._vocabulary",
    ]
    integrations, importers = loaded
    assert after == {
        "agents/item": [integrations, False],
        "agents/retract": [integrations, True],
        "claude/entry": [integrations, False],
        "codex/entry": [importers, False],
        "import/verbatim": [importers, False],
        "opencode/message": [importers, False],
        "opencode/session": [importers, False],
    }


async def _adapters_database(url: str) -> list[str]:
    """A database of every adapter's sessions, written by the adapters themselves, and one
    whose adapter events are not ignorable (another writer may store them so). Its ids."""
    async with SessionStore(url) as store:
        for agent in ("claude-code", "codex"):
            root = FIXTURES / (
                "claude-code/projects" if agent == "claude-code" else "codex/sessions"
            )
            results = await import_paths(store, get_importer(agent), [root])
            assert all(r.status == "created" for r in results), results
        key = {"project_key": "/home/ada/proj", "session_id": "s-1"}
        await TodoSessionsStore(store).append(
            key,
            [
                {"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hi"}},
                {"type": "summary", "summary": "a greeting", "leafUuid": "u1"},
            ],
        )
        agents = TodoSessionsSession("chat-1", store)
        await agents.add_items(
            [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi!"}]
        )
        await agents.pop_item()
        await store.create(SessionHeader(id="strict", created_at=T0))
        await store.append(
            "strict",
            [
                SessionEvent("claude/entry", 0, T0, {"type": "note", "text": "kept"}),
                SessionEvent("agents/item", 1, T0, {"role": "user", "content": "x"}),
                SessionEvent("codex/entry", 2, T0, {"type": "event_msg"}),
                SessionEvent("import/verbatim", 3, T0, {"line": "{}"}),
                SessionEvent("opencode/session", 4, T0, {"info": {"id": "ses_1"}}),
                SessionEvent("opencode/message", 5, T0, {"info": {"id": "msg_1"}, "parts": []}),
            ],
        )
        ids = sorted([sid async for sid in store.session_ids()])
    kinds = set()
    async with SessionStore(url) as store:
        for sid in ids:
            kinds |= {e.type for e in await store.read_from(sid)}
    assert set(ADAPTER_TYPES) <= kinds  # every adapter type is in the database
    return ids


DAMAGE = textwrap.dedent(
    """
    import asyncio, sys
    import todo_sessions._vocabularies as vocabularies
    # a writer that knew none of the adapters' types (an older or a foreign one): it stores
    # their events unchecked, as ignorable unknown types
    vocabularies._started = vocabularies._done = True
    from todo_sessions import SessionEvent, SessionHeader, SessionStore

    async def main(url):
        async with SessionStore(url) as store:
            await store.create(SessionHeader(id="damaged", created_at=1))
            await store.append("damaged", [
                SessionEvent("claude/entry", 0, 1, {"message": "no type"}, ignorable=True),
                SessionEvent("agents/retract", 1, 1, {"items": [0], "reason": "undo"},
                             ignorable=True),
            ])

    asyncio.run(main(sys.argv[1]))
    """
)


COMMANDS = textwrap.dedent(
    """
    import json, sys
    from click.testing import CliRunner
    from todo_sessions.cli import main
    done = []
    for args in json.loads(sys.argv[1]):
        result = CliRunner().invoke(main, args, prog_name="todo-sessions")
        done.append([result.exit_code, result.stdout, result.stderr])
    print(json.dumps(done))
    """
)
"""Several commands in one interpreter (the first of them finds the registry as the core
leaves it), each as `todo-sessions ARGS` would run it: ``[[status, stdout, stderr], ...]``."""


def commands(*runs: list[str], preamble: str = "") -> list[list[Any]]:
    done = python(preamble + COMMANDS, json.dumps(runs))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def test_a_process_that_never_imported_the_adapters_reads_their_sessions_as_before(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/adapters.db"
    ids = await _adapters_database(url)
    damaged = python(DAMAGE, url)
    assert damaged.returncode == 0, damaged.stderr
    sessions = [*ids, "damaged"]
    each: dict[str, list[list[str]]] = {
        "verify": [["--db", url, "verify"], ["--db", url, "verify", "--json"]],
        "show": [["--db", url, "show", sid] for sid in sessions],
        "export": [["--db", url, "export", sid] for sid in sessions],
        "messages": [["--db", url, "messages", sid] for sid in sessions],
    }
    for name, runs in each.items():  # each kind of command first in a fresh interpreter
        fresh = commands(*runs)
        assert fresh == commands(*runs, preamble=EVERY_VOCABULARY), name
        if name in ("show", "export"):
            assert [status for status, _, _ in fresh] == [0] * len(sessions), fresh
    # the fresh process checked the adapters' payloads as their models do ...
    [[status, report, _]] = commands(["--db", url, "verify", "damaged"])
    assert status == 1
    assert "'claude/entry' (seq 0): data.type: Field required" in report, report
    assert "'agents/retract' (seq 1): data.reason" in report, report
    # ... and read the adapters' events that are not ignorable, which it would refuse as unknown
    [[status, exported, _]] = commands(["--db", url, "export", "strict"])
    assert status == 0 and '"type":"agents/item"' in exported.replace(" ", ""), exported

    # an export imports in a fresh process as it did before: the valid one, then the damaged
    # one refused with the same error
    path = tmp_path / "strict.jsonl"
    path.write_text(exported, encoding="utf-8")
    bad = tmp_path / "damaged.jsonl"
    bad.write_text(commands(["--db", url, "export", "damaged"])[0][1], encoding="utf-8")
    results = []
    for n, preamble in enumerate(("", EVERY_VOCABULARY)):
        other = f"sqlite:///{tmp_path}/other{n}.db"
        runs = [["--db", other, "import", str(bad)], ["--db", other, "import", str(path)]]
        results.append(commands(*runs, ["--db", other, "export", "strict"], preamble=preamble))
    assert results[0] == results[1]
    (refused, _, error), (status, _, _), (_, again, _) = results[0]
    assert refused == 1 and "'claude/entry' (seq 0): data.type: Field required" in error, error
    assert status == 0 and again == exported


# -- a vocabulary of another distribution, through its entry point -----------------------------


def fake_distribution(where: Path, entry_points: str, modules: dict[str, str]) -> Path:
    """An installed distribution ``acme-events`` as site-packages holds one: its modules and an
    ``acme_events-1.0.dist-info`` with ``entry_points.txt``."""
    info = where / "acme_events-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: acme-events\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")
    for name, source in modules.items():
        (where / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return where


ACME = {
    "acme_events": """
        from pydantic import BaseModel
        from todo_sessions import register_event_type

        class Note(BaseModel):
            text: str

        register_event_type("acme/note", Note)
        """,
    "acme_more": """
        from pydantic import BaseModel

        class Pin(BaseModel):
            at: int

        def register():
            from todo_sessions import register_event_type
            register_event_type("acme/pin", Pin)
        """,
}
ACME_POINTS = (
    "[todo_sessions.vocabularies]\nnotes = acme_events\npins = acme_more:register\n"
    "[console_scripts]\nacme = acme_events:main\n"
)

WRITE = textwrap.dedent(
    """
    import asyncio, sys
    from todo_sessions import InvalidEventError, SessionEvent, SessionHeader, SessionStore

    async def main(url):
        async with SessionStore(url) as store:
            await store.create(SessionHeader(id="acme", created_at=1))
            try:
                await store.append("acme", [SessionEvent("acme/note", 0, 1, {"text": 3})])
            except InvalidEventError as exc:
                print("refused:", exc.field, "|", exc)
            await store.append("acme", [
                SessionEvent("acme/note", 0, 1, {"text": "hello"}),
                SessionEvent("acme/pin", 1, 2, {"at": 7}),
            ])
            print(sorted(m for m in sys.modules if m.startswith("acme")))
            try:
                await store.append("acme", [SessionEvent("nobody/knows", 2, 3, {})])
            except InvalidEventError as exc:
                print("unknown:", exc.field, "|", exc)

    asyncio.run(main(sys.argv[1]))
    """
)


def test_a_vocabulary_of_another_distribution_registers_by_its_entry_point(
    tmp_path: Path,
) -> None:
    site = fake_distribution(tmp_path / "site", ACME_POINTS, ACME)
    url = f"sqlite:///{tmp_path}/acme.db"
    written = python(WRITE, url, path=(site,))
    assert written.returncode == 0, written.stderr
    refused, modules, unknown = written.stdout.splitlines()
    # its events are checked by its model, although nothing imported it: the store's append
    # loaded it (a module, and a function it then called)
    assert refused.startswith("refused: data.text | invalid event 'acme/note' (seq 0): data.text")
    assert modules == "['acme_events', 'acme_more']"
    # a type no vocabulary registers is refused as before
    assert unknown == (
        "unknown: type | unknown event 'nobody/knows' (seq 2): the type is not registered and "
        "the event is not marked ignorable"
    )

    # round trip in fresh processes: show, verify, export, import, export again
    show = python(CLI, "--db", url, "show", "acme", path=(site,))
    assert show.returncode == 0 and "2 events" in show.stdout, show.stderr
    assert python(CLI, "--db", url, "verify", path=(site,)).returncode == 0
    exported = tmp_path / "acme.jsonl"
    exported.write_text(python(CLI, "--db", url, "export", "acme", path=(site,)).stdout)
    other = f"sqlite:///{tmp_path}/other.db"
    imported = python(CLI, "--db", other, "import", str(exported), path=(site,))
    assert imported.returncode == 0, imported.stderr
    again = python(CLI, "--db", other, "export", "acme", path=(site,))
    assert again.stdout == exported.read_text()

    # without the distribution, its events are what an unknown type's are: a clear typed
    # error naming the type, as before
    alone = python(CLI, "--db", url, "show", "acme")
    assert alone.returncode == 1
    assert alone.stderr.startswith("error: ") and (
        "event type 'acme/note' (seq 0) is not known to this version and is not marked "
        "ignorable" in alone.stderr
    ), alone.stderr
    refused_import = python(CLI, "--db", f"sqlite:///{tmp_path}/x.db", "import", str(exported))
    assert refused_import.returncode == 1 and "unknown event 'acme/note'" in refused_import.stderr


def test_a_broken_vocabulary_is_named_in_a_warning_and_the_others_load(tmp_path: Path) -> None:
    points = "[todo_sessions.vocabularies]\nbroken = acme_broken\nnotes = acme_events\n"
    modules = {**ACME, "acme_broken": "raise RuntimeError('cannot load')\n"}
    site = fake_distribution(tmp_path / "site", points, modules)
    code = textwrap.dedent(
        """
        import warnings
        from todo_sessions import EVENT_TYPES, load_vocabularies
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loaded = load_vocabularies()
        print(loaded[2:], "acme/note" in EVENT_TYPES)
        print(*[f"{w.category.__name__}: {w.message}" for w in caught], sep="\\n")
        """
    )
    done = python(code, path=(site,))
    assert done.returncode == 0, done.stderr
    first, warning = done.stdout.splitlines()
    assert first == "['acme_events'] True"
    assert warning == (
        "RuntimeWarning: the event vocabulary 'broken' = 'acme_broken' (entry point of "
        "acme-events in 'todo_sessions.vocabularies') failed to load: RuntimeError: cannot "
        "load; its event types stay unknown to todo_sessions"
    )


def _registered(code: str) -> Any:
    done = python(code)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_live_session_loads_the_vocabularies_before_it_validates() -> None:
    code = textwrap.dedent(
        """
        import json
        from todo_sessions import InvalidEventError, Session, SessionHeader
        session = Session(SessionHeader(id="s", created_at=1))
        try:
            session.append("agents/retract", {"items": [], "reason": "undo"}, ignorable=True)
        except InvalidEventError as exc:
            print(json.dumps([exc.event_type, exc.field]))
        """
    )
    assert _registered(code) == ["agents/retract", "data.reason"]
