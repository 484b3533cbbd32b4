"""The viewer in a real browser: headless Debian Chromium (driven by selenium through Debian's
chromedriver; nothing is downloaded) opens the demo session served by ``todo-sessions serve``,
moves the seq with the keyboard, the slider and a click, and checks both panes against
`current_todos` and `derive_messages` at that seq. A screenshot is saved under the test's tmp
dir. Skipped when /usr/bin/chromium or /usr/bin/chromedriver is missing (.ci/run installs
them)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

pytest.importorskip("starlette")
pytest.importorskip("selenium")

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait
from test_web import DEMO, append_turn_elsewhere, current, make_demo, serving

from todo_sessions import SyncSessionStore
from todo_sessions.web.messages import messages_json

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
        reason="needs Debian's chromium and chromium-driver (/usr/bin/chromium, "
        "/usr/bin/chromedriver): apt-get install -y chromium chromium-driver",
    ),
]

WAIT = 30  # seconds: a ceiling for a busy machine, not a measurement


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('browser') / 'browser.db'}"
    make_demo(url)
    return url


@pytest.fixture(scope="module")
def base(db: str) -> Iterator[str]:
    with serving(db) as base:
        yield base


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    options = Options()
    options.binary_location = str(CHROMIUM)
    profile = tmp_path_factory.mktemp("chromium-profile")
    for argument in (
        "--headless=new",
        "--no-sandbox",  # the tests run as root
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--window-size=1400,1000",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(WAIT)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def shown_at(driver: webdriver.Chrome, seq: int) -> None:
    """Wait until the panes show seq ``seq`` (the page sets data-shown-at once they have)."""

    def ready(d: Any) -> bool:
        root = d.find_element(By.ID, "session")
        return bool(root.get_attribute("data-shown-at") == str(seq))

    WebDriverWait(driver, WAIT).until(ready)


def check_panes(
    driver: webdriver.Chrome, store: SyncSessionStore, session_id: str, at: int, *, url: bool = True
) -> None:
    assert driver.find_element(By.ID, "seq").get_attribute("value") == str(at)
    if url:
        assert driver.current_url.endswith(f"?at={at}")
    items = [
        (
            li.find_element(By.CSS_SELECTOR, ".content").text,
            li.get_attribute("data-status"),
        )
        for li in driver.find_elements(By.CSS_SELECTOR, "#todos li.todo")
        if li.get_attribute("data-change") != "removed"
    ]
    assert items == (current(store.current_todos(session_id, upto_seq=at)) or [])
    expected = messages_json(store.derive_messages(session_id, upto_seq=at))
    roles = [
        li.get_attribute("data-role")
        for li in driver.find_elements(By.CSS_SELECTOR, "#messages li.msg")
    ]
    assert roles == [m["role"] for m in expected]
    selected = driver.find_elements(By.CSS_SELECTOR, "#timeline li.ev.selected")
    assert [li.get_attribute("data-seq") for li in selected] == [str(at)]


def test_moving_the_seq_updates_both_panes(
    browser: webdriver.Chrome, base: str, db: str, tmp_path: Path
) -> None:
    with SyncSessionStore(db) as store:
        browser.get(f"{base}/sessions/{DEMO}?at=40")
        check_panes(browser, store, DEMO, 40)  # as the server rendered it

        body = browser.find_element(By.TAG_NAME, "body")
        body.send_keys(Keys.ARROW_RIGHT)
        shown_at(browser, 41)
        check_panes(browser, store, DEMO, 41)

        for _ in range(5):
            body.send_keys(Keys.ARROW_LEFT)
        shown_at(browser, 36)
        check_panes(browser, store, DEMO, 36)

        slider = browser.find_element(By.ID, "seq")
        browser.execute_script(
            "arguments[0].value = 100; arguments[0].dispatchEvent(new Event('input'))", slider
        )
        shown_at(browser, 100)
        check_panes(browser, store, DEMO, 100)

        link = browser.find_element(By.CSS_SELECTOR, '#timeline li.ev[data-seq="16"] a.seq')
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
        link.click()
        shown_at(browser, 16)
        check_panes(browser, store, DEMO, 16)
        changed = browser.find_elements(By.CSS_SELECTOR, "#todos li.todo.ch-added")
        assert len(changed) == 3  # the first write: every item is new

        shot = tmp_path / "session-at-16.png"
        assert browser.save_screenshot(str(shot))
        assert shot.stat().st_size > 0
        print(f"screenshot: {shot}")

        browser.back()  # the URL held each seq: back returns to the slider's
        shown_at(browser, 100)
        check_panes(browser, store, DEMO, 100)


def test_the_open_page_follows_another_writer(
    browser: webdriver.Chrome, base: str, db: str, tmp_path: Path
) -> None:
    with SyncSessionStore(db) as store:
        last = store.summary(DEMO).next_seq - 1
        browser.get(f"{base}/sessions/{DEMO}")  # no seq: the end, following new events
        check_panes(browser, store, DEMO, last, url=False)
        WebDriverWait(browser, WAIT).until(
            lambda d: "on" in (d.find_element(By.ID, "live").get_attribute("class") or "")
        )

        new_last = append_turn_elsewhere(db, DEMO, 3, "written <b>elsewhere</b>")

        def arrived(d: Any) -> bool:
            return bool(d.find_elements(By.CSS_SELECTOR, f'#timeline li.ev[data-seq="{new_last}"]'))

        WebDriverWait(browser, WAIT).until(arrived)
        shown_at(browser, new_last)  # it was at the end, so it follows the end
        check_panes(browser, store, DEMO, new_last)
        todos = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#todos .content")]
        assert "written <b>elsewhere</b>" in todos
        assert browser.find_element(By.ID, "events").text == str(new_last + 1)
        assert browser.find_element(By.ID, "turns").text == "3 turns"
        browser.save_screenshot(str(tmp_path / "live.png"))


def test_fork_and_export_buttons(browser: webdriver.Chrome, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fork.db'}"
    make_demo(url)
    with SyncSessionStore(url) as store, serving(url, "--allow-writes") as writable:
        between = next(e.seq for e in store.read_from(DEMO) if e.type == "turn/end")
        browser.get(f"{writable}/sessions/{DEMO}?at=5")
        fork = browser.find_element(By.ID, "fork")
        assert not fork.is_enabled()  # inside turn 1
        assert "turn 1 is still open" in (fork.get_attribute("title") or "")
        export = browser.find_element(By.ID, "export")
        assert export.get_attribute("href") == f"{writable}/api/sessions/{DEMO}/export"

        browser.get(f"{writable}/sessions/{DEMO}?at={between}")
        browser.find_element(By.ID, "fork").click()
        link = WebDriverWait(browser, WAIT).until(
            lambda d: d.find_element(By.CSS_SELECTOR, "#fork-result a")
        )
        child = link.text.removeprefix("forked into ")
        assert store.header(child).parent_session == DEMO
        assert store.header(child).seed_length == between + 1
        link.click()
        opened = f"/sessions/{quote(child, safe='')}"
        WebDriverWait(browser, WAIT).until(lambda d: d.current_url.endswith(opened))
        assert f"forked from {DEMO}" in browser.find_element(By.CSS_SELECTOR, ".facts").text
