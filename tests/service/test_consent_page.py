"""Consent by voice on the transparency page and in the API: an opt-out said in a conversation shows with what the
user said and when; the API's opt-out list and export carry the same record."""
from __future__ import annotations

import pytest

from .conftest import KEY_A, auth, conversation

try:   # the page fixtures (uvicorn server, headless chromium); the module skips itself without selenium
    from . import test_page as tp
    from .test_page import browser, server  # noqa: F401  (fixtures)
except pytest.skip.Exception:
    tp = None

SAID = "Hey car, stop remembering where I like to eat <b>please</b>."


def test_api_ingest_reports_consent_and_lists_and_exports_the_record(client):
    r = client.post("/v1/users/alice/conversations", headers=auth(KEY_A),
                    json=conversation("c1", "I love Italian food.", "I love jazz music."))
    assert r.status_code == 200 and len(r.json()["decisions"]) == 2
    r = client.post("/v1/users/alice/conversations", headers=auth(KEY_A), json=conversation("c2", SAID))
    assert r.status_code == 200, r.text
    assert [(c["kind"], c["prefix"], c["removed"]) for c in r.json()["consent"]] == [("opt_out", "points_of_interest/restaurant", 1)]
    outs = client.get("/v1/users/alice/opt-outs", headers=auth(KEY_A)).json()
    assert outs["opt_outs"] == ["points_of_interest/restaurant"]
    assert [(c["prefix"], c["utterance"]) for c in outs["consents"]] == [("points_of_interest/restaurant", SAID)]
    e = client.get("/v1/users/alice/export", headers=auth(KEY_A)).json()
    assert [(c["prefix"], c["utterance"]) for c in e["consents"]] == [("points_of_interest/restaurant", SAID)]
    assert "acme:" not in str(e)
    r = client.post("/v1/users/alice/conversations", headers=auth(KEY_A), json=conversation("c3", "I love Mexican food."))
    assert r.json()["decisions"] == []


@pytest.mark.skipif(tp is None or not (tp.CHROMIUM and tp.CHROMEDRIVER),
                    reason="needs selenium, Debian chromium + chromium-driver (see test_page.py)")
def test_page_shows_each_opt_outs_consent_record(memory, server, browser, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By

    from boundmem.models import Conversation, Turn

    memory.add(Conversation(id="c1", turns=(Turn(role="user", text="I love Italian food."),
                                            Turn(role="user", text="I love jazz music."))), "acme:alice")
    memory.add(Conversation(id="c2", turns=(Turn(role="user", text=SAID),)), "acme:alice")
    memory.opt_out("acme:alice", "Parking")   # by button/API: a record without an utterance
    browser.get(tp._page_link(server, "alice"))
    tp._wait(lambda: len(tp._rows(browser)) == 1, "the one preference left")
    items = tp._wait(lambda: browser.find_elements(By.CSS_SELECTOR, "#consents li"), "the consent records")
    assert browser.find_element(By.ID, "consent-section").is_displayed()
    by = {li.get_attribute("data-prefix"): li for li in items}
    assert set(by) == {"points_of_interest/restaurant", "navigation_and_routing/parking"}
    rest = by["points_of_interest/restaurant"]
    assert rest.find_element(By.CSS_SELECTOR, ".category").text == "Restaurant"
    assert rest.find_element(By.CSS_SELECTOR, "q.utterance").text == SAID   # markup stays text
    assert not browser.find_elements(By.CSS_SELECTOR, "#consents b")
    assert rest.find_element(By.CSS_SELECTOR, ".when").text.strip(" \u2014")   # when it was said
    assert not by["navigation_and_routing/parking"].find_elements(By.CSS_SELECTOR, "q.utterance")
    box = browser.find_element(By.CSS_SELECTOR, 'input[data-category="points_of_interest/restaurant"]')
    assert not box.is_selected()
    tp._shot(browser, tmp_path, "page-consent.png")
