"""The installed wheel without extras: the library and the command line work, and each
subpackage whose extra is missing says so in one line, naming the extra.

The wheel is built from this checkout (``pip wheel --no-deps``, hatchling in pip's build
isolation) and installed with ``pip --python`` into a fresh venv made without pip. Its base
dependencies, the closure of the wheel's own ``Requires-Dist`` without extras, are linked in
from the environment running the tests (where they are installed already), so the test needs no
index and takes seconds; nothing else is there: no asyncpg, jsonschema, starlette, acp, ... The
venv's processes run outside the checkout, with no ``PYTHONPATH``.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]  # one build for the module

ROOT = Path(__file__).resolve().parents[1]

EXTRAS = {  # the subpackage, the module of its extra it needs, the extra the error names
    "todo_sessions.harness": ("jsonschema", "harness"),
    "todo_sessions.acp": ("acp", "acp"),
    "todo_sessions.web": ("starlette", "web"),
    "todo_sessions.integrations.claude_agent_sdk": ("claude_agent_sdk", "claude"),
    "todo_sessions.integrations.openai_agents": ("agents", "openai-agents"),
}


def base_requirements(wheel: Path) -> list[Requirement]:
    """The wheel's ``Requires-Dist`` that no extra guards."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(name).decode())
    found = [Requirement(line) for line in metadata.get_all("Requires-Dist") or []]
    return [r for r in found if r.marker is None or r.marker.evaluate({"extra": ""})]


def closure(requirements: list[Requirement]) -> list[importlib.metadata.Distribution]:
    """The installed distributions ``requirements`` need, theirs included (with the extras
    asked for, such as ``sqlalchemy[asyncio]``)."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = list(requirements)
    while todo:
        requirement = todo.pop()
        key = canonicalize_name(requirement.name)
        if key in found:
            continue
        dist = importlib.metadata.distribution(requirement.name)
        assert dist.version in requirement.specifier, (requirement, dist.version)
        found[key] = dist
        extras = ["", *requirement.extras]
        for line in dist.requires or []:
            needed = Requirement(line)
            if needed.marker is None or any(
                needed.marker.evaluate({"extra": extra}) for extra in extras
            ):
                todo.append(needed)
    return list(found.values())


def link_into(site: Path, dist: importlib.metadata.Distribution) -> None:
    """Each top-level entry of ``dist`` (packages, modules, its .dist-info) as a link in
    ``site``."""
    tops = {f.parts[0] for f in dist.files or [] if f.parts[0] not in ("..", "__pycache__")}
    for top in sorted(tops):
        source = Path(str(dist.locate_file(top)))
        target = site / top
        if source.exists() and not target.exists():
            target.symlink_to(source, target_is_directory=source.is_dir())


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding the wheel and its base dependencies only; its ``bin`` directory."""
    work = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", work / "dist", ROOT], check=True)
    (wheel,) = (work / "dist").glob("todo_sessions-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "todo_sessions/cli/__init__.py" in names and "todo_sessions/render.py" not in names
    venv.create(work / "venv", with_pip=False, symlinks=True)
    python = work / "venv" / "bin" / "python"
    subprocess.run(
        [*pip, "--python", python, "install", "--no-deps", "--no-index", wheel], check=True
    )
    code = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = Path(subprocess.check_output([python, "-c", code], text=True).strip())
    assert sysconfig.get_python_version() in str(site)
    for dist in closure(base_requirements(wheel)):
        link_into(site, dist)
    return python.parent


def run(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A process of the venv, outside the checkout, with nothing added to its path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TODO_SESSIONS"))}
    command = [str(bin_dir / args[0]), *args[1:]]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def python(bin_dir: Path, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run(bin_dir, "python", "-c", code, cwd=cwd)


def test_the_venv_holds_no_extra(installed: Path, tmp_path: Path) -> None:
    code = (
        "import importlib.util, todo_sessions\n"
        "print(todo_sessions.__file__)\n"
        "for name in ('asyncpg', 'jsonschema', 'starlette', 'acp', 'agents', 'claude_agent_sdk',"
        " 'openai', 'anthropic', 'aiosqlite'):\n"
        "    assert importlib.util.find_spec(name) is None, name\n"
    )
    done = python(installed, code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(str(installed.parent / "lib"))  # the wheel, not the checkout


def test_the_root_imports_and_the_sqlite_store_works(installed: Path, tmp_path: Path) -> None:
    code = (
        "import asyncio, sys\n"
        "from todo_sessions import SessionEvent, SessionHeader, SessionStore\n"
        "async def main():\n"
        "    async with SessionStore('s.db') as store:\n"
        "        await store.create(SessionHeader(id='s', created_at=1))\n"
        "        await store.append('s', [SessionEvent('request/context', 0, 1, {'text': 'x'})])\n"
        "        print(len(await store.read_from('s')), (await store.summary('s')).next_seq)\n"
        "asyncio.run(main())\n"
    )
    done = python(installed, code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1 1\n"


def test_the_command_line_runs(installed: Path, tmp_path: Path) -> None:
    helped = run(installed, "todo-sessions", "--help", cwd=tmp_path)
    assert helped.returncode == 0, helped.stderr
    assert "Commands:" in helped.stdout and "verify" in helped.stdout
    for args in (["migrate"], ["list", "--json"], ["verify"]):
        done = run(installed, "todo-sessions", "--db", "c.db", *args, cwd=tmp_path)
        assert done.returncode == 0, (args, done.stderr)
    assert run(
        installed, "todo-sessions", "--db", "c.db", "list", "--json", cwd=tmp_path
    ).stdout == ("[]\n")


@pytest.mark.parametrize("module", sorted(EXTRAS))
def test_a_subpackage_without_its_extra_names_it_in_one_line(
    installed: Path, tmp_path: Path, module: str
) -> None:
    extra = EXTRAS[module][1]
    done = python(installed, f"import {module}", tmp_path)
    assert done.returncode == 1
    last = done.stderr.splitlines()[-1]
    assert last.startswith("ImportError: ") and f"pip install 'todo-sessions[{extra}]'" in last


def test_postgresql_without_its_extra_names_it(installed: Path, tmp_path: Path) -> None:
    code = (
        "import asyncio\n"
        "from todo_sessions import SessionStore, StoreError\n"
        "async def main():\n"
        "    try:\n"
        "        await SessionStore('postgresql://u@127.0.0.1:1/db').open()\n"
        "    except StoreError as exc:\n"
        "        print(exc)\n"
        "asyncio.run(main())\n"
    )
    done = python(installed, code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "pip install 'todo-sessions[postgres]'" in done.stdout


@pytest.mark.parametrize(
    ("command", "extra"), [("demo", "harness"), ("acp", "acp"), ("serve", "web")]
)
def test_a_command_without_its_extra_is_one_line(
    installed: Path, tmp_path: Path, command: str, extra: str
) -> None:
    done = run(installed, "todo-sessions", "--db", "c.db", command, cwd=tmp_path)
    assert done.returncode in (1, 2)
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error: ") and f"todo-sessions[{extra}]" in done.stderr
