"""The transparency page, driven in headless Debian chromium: a user sees what is stored with the sentence it
came from, deletes an item, and switches a category off; each action must reach the store."""
from __future__ import annotations

import os
import shutil
import socket
import threading
import time

import pytest

from .conftest import KEY_A, KEYS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                                reason="needs Debian chromium + chromium-driver (apt-get install chromium chromium-driver; .ci/run does)")
webdriver = pytest.importorskip("selenium.webdriver", reason="needs the selenium package (requirements-dev.txt)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def server(memory):
    import uvicorn

    from boundmem.service.app import create_app

    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(create_app(memory, KEYS), host="127.0.0.1", port=port, log_level="warning"))
    t = threading.Thread(target=srv.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        if time.monotonic() > deadline or not t.is_alive():
            pytest.fail("uvicorn did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    t.join(10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One chromium for the module (it is the slow part); each test starts from its own server and page."""
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1280,1400", f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        opts.add_argument(flag)
    d = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    d.implicitly_wait(0)
    yield d
    d.quit()


def _wait(pred, what: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _rows(d):
    from selenium.webdriver.common.by import By

    return d.find_elements(By.CSS_SELECTOR, "#prefs tbody tr")


def _shot(d, tmp_path, name):
    """Keep screenshots (BOUNDMEM_SCREENSHOTS=dir) so a person can look at the page."""
    out = os.environ.get("BOUNDMEM_SCREENSHOTS")
    d.save_screenshot(str(os.path.join(out, name) if out else tmp_path / name))


def test_user_sees_deletes_and_opts_out(memory, server, browser, tmp_path):
    from selenium.webdriver.common.by import By

    from boundmem.models import Conversation, Turn

    italian = "I love Italian food <b>really</b>."  # markup in a remembered sentence must stay text
    jazz = "Please play some Jazz while we drive."
    memory.add(Conversation(id="c1", turns=(Turn(role="user", text=italian), Turn(role="user", text=jazz))), "acme:alice")
    assert len(memory.store.preferences("acme:alice")) == 2

    link = _page_link(server, "alice")
    assert KEY_A not in link and "#token=" in link   # the tenant key never goes into a URL; the user token does
    browser.get(link)
    _wait(lambda: len(_rows(browser)) == 2, "both preferences listed")
    assert "token" not in browser.current_url  # the token is dropped from the address bar
    assert browser.find_element(By.ID, "who").text.startswith("alice")
    text = {r.get_attribute("data-path"): r.text for r in _rows(browser)}
    assert italian in text["points_of_interest/restaurant/favorite_cuisine"]
    assert "Favorite Cuisine" in text["points_of_interest/restaurant/favorite_cuisine"]
    assert jazz in text["entertainment_and_media/music/favorite_genres"]
    assert not browser.find_elements(By.CSS_SELECTOR, "#prefs b")
    _shot(browser, tmp_path, "page-loaded.png")

    # delete Jazz
    row = next(r for r in _rows(browser) if r.get_attribute("data-path").endswith("favorite_genres"))
    row.find_element(By.CSS_SELECTOR, "button.delete").click()
    _wait(lambda: len(_rows(browser)) == 1, "the deleted row to disappear")
    assert "Jazz" not in browser.find_element(By.ID, "prefs").text
    assert [p.attribute for p in memory.store.preferences("acme:alice")] == ["Italian"]

    # switch off restaurants
    box = browser.find_element(By.CSS_SELECTOR, 'input[data-category="points_of_interest/restaurant"]')
    assert box.is_selected()
    box.click()
    _wait(lambda: len(_rows(browser)) == 0, "the opted-out preference to disappear")
    _wait(lambda: browser.find_element(By.ID, "empty").is_displayed(), "the empty notice")
    assert memory.store.opt_outs("acme:alice") == ["points_of_interest/restaurant"]
    assert memory.store.preferences("acme:alice") == []
    # its details now show as off because of the parent rule, and cannot be switched on alone
    detail = _wait(lambda: browser.find_elements(By.CSS_SELECTOR, 'input[data-category="points_of_interest/restaurant/favorite_cuisine"]'),
                   "the re-rendered category list")[0]
    assert not detail.is_selected() and not detail.is_enabled()
    _shot(browser, tmp_path, "page-opted-out.png")


def _page_link(server: str, user: str) -> str:
    import httpx

    r = httpx.post(f"{server}/v1/users/{user}/tokens", headers={"Authorization": f"Bearer {KEY_A}"})
    assert r.status_code == 201, r.text
    return r.json()["page_url"]


def _error_status(browser):
    from selenium.webdriver.common.by import By

    return _wait(lambda: browser.find_element(By.ID, "status").text.startswith("Could not") and browser.find_element(By.ID, "status"),
                 "an error message")


def test_wrong_token_shows_an_error_and_nothing(memory, server, browser):
    from selenium.webdriver.common.by import By

    link = _page_link(server, "alice")
    browser.get(link[:-4] + "AAAA")   # a forged signature
    assert "401" in _error_status(browser).text
    assert not browser.find_element(By.ID, "memory").is_displayed()


def test_the_tenant_key_opens_nothing_on_the_page(memory, server, browser):
    """The old link form (#key=TENANT-KEY&user=...) is dead, and the tenant key typed in is refused."""
    from selenium.webdriver.common.by import By

    from boundmem.models import Conversation, Turn

    memory.add(Conversation(id="c1", turns=(Turn(role="user", text="I love Italian food."),)), "acme:alice")
    browser.get(f"{server}/ui#key={KEY_A}&user=alice")
    time.sleep(1.0)
    assert not browser.find_element(By.ID, "memory").is_displayed() and not _rows(browser)
    assert KEY_A not in browser.current_url
    box = browser.find_element(By.ID, "token")
    box.send_keys(KEY_A)
    browser.find_element(By.ID, "load").click()
    assert "not the tenant API key" in _error_status(browser).text
    assert not browser.find_element(By.ID, "memory").is_displayed() and "Italian" not in browser.page_source


def _say(memory, user: str, cid: str, *texts: str) -> None:
    from boundmem.models import Conversation, Turn

    memory.add(Conversation(id=cid, turns=tuple(Turn(role="user", text=t) for t in texts)), user)


def test_dislikes_avoidances_and_labels_read_as_meant(memory, server, browser, tmp_path):
    from selenium.webdriver.common.by import By

    _say(memory, "acme:alice", "c1", "I can't stand Jazz.", "I always avoid Highways.", "I love Italian food.")
    browser.get(_page_link(server, "alice"))
    _wait(lambda: len(_rows(browser)) == 3, "three preferences listed")
    value = {r.get_attribute("data-path").rsplit("/", 1)[-1]: r.find_element(By.CSS_SELECTOR, "td.attribute").text
             for r in _rows(browser)}
    assert value == {"favorite_genres": "Dislikes: Jazz", "avoidance_of_specific_road_types": "Avoids: Highways",
                     "favorite_cuisine": "Italian"}
    assert "not Jazz" not in browser.find_element(By.ID, "prefs").text
    cats = browser.find_element(By.ID, "categories").text
    assert "Interior Lighting Color Preferences" in cats and "Public Charging Stations" in cats
    assert "Lightning" not in cats and "f.e." not in cats and "(in public)" not in cats
    _shot(browser, tmp_path, "page-polarity.png")


def test_an_edited_value_is_marked_and_its_sentence_read_as_the_earlier_one(memory, server, browser, tmp_path):
    from selenium.webdriver.common.by import By

    _say(memory, "acme:alice", "c1", "I love Italian food.", "Please play some Jazz.")
    food = next(p for p in memory.preferences("acme:alice") if p.attribute == "Italian")
    memory.update("acme:alice", food.id, attribute="Mexican")
    browser.get(_page_link(server, "alice"))
    _wait(lambda: len(_rows(browser)) == 2, "two preferences listed")
    row = {r.get_attribute("data-id"): r for r in _rows(browser)}
    edited, other = row.pop(food.id), next(iter(row.values()))
    assert edited.find_element(By.CSS_SELECTOR, "td.attribute").text == "Mexican edited"
    assert edited.find_element(By.CSS_SELECTOR, "td.sentence").text.startswith("before your edit: ")
    assert not other.find_elements(By.CSS_SELECTOR, "span.edited")
    assert not other.find_element(By.CSS_SELECTOR, "td.sentence").text.startswith("before")
    _shot(browser, tmp_path, "page-edited.png")


def _observed(d):
    from selenium.webdriver.common.by import By

    return d.find_elements(By.CSS_SELECTOR, "#observations > li")


def test_observations_are_listed_apart_and_confirmed_or_dismissed(memory, server, browser, tmp_path):
    from selenium.webdriver.common.by import By

    _say(memory, "acme:alice", "c1", "I love Italian food.")
    _say(memory, "acme:alice", "c2", "Play some Rock.")
    _say(memory, "acme:alice", "c3", "Play some Rock.")
    _say(memory, "acme:alice", "c4", "Play some Pop.")
    browser.get(_page_link(server, "alice"))
    _wait(lambda: len(_observed(browser)) == 2, "two observed choices listed")
    section = browser.find_element(By.ID, "observed-section")
    assert section.is_displayed() and "Noticed, not yet remembered" in section.text
    by_value = {li.find_element(By.CSS_SELECTOR, ".choice").text: li for li in _observed(browser)}
    assert set(by_value) == {"you chose Rock in 2 conversations", "you chose Pop in 1 conversation"}
    assert [r.get_attribute("data-path").rsplit("/", 1)[-1] for r in _rows(browser)] == ["favorite_cuisine"]
    _shot(browser, tmp_path, "page-observations.png")

    by_value["you chose Rock in 2 conversations"].find_element(By.CSS_SELECTOR, "button.confirm").click()
    _wait(lambda: len(_rows(browser)) == 2, "the confirmed choice listed as a preference")
    assert {p.attribute for p in memory.store.preferences("acme:alice")} == {"Italian", "Rock"}
    _wait(lambda: [li.find_element(By.CSS_SELECTOR, ".choice").text for li in _observed(browser)]
          == ["you chose Pop in 1 conversation"], "only Pop left to decide")
    assert "Remembered" in browser.find_element(By.ID, "status").text

    _observed(browser)[0].find_element(By.CSS_SELECTOR, "button.dismiss").click()
    _wait(lambda: not browser.find_element(By.ID, "observed-section").is_displayed(), "the section to go")
    assert memory.observations("acme:alice") == []
    assert "dismiss" in [a.op for a in memory.store.audit("acme:alice")]
    assert {p.attribute for p in memory.store.preferences("acme:alice")} == {"Italian", "Rock"}
