"""Consent by voice, local detection: which clauses are consent requests, and which category they name."""
from __future__ import annotations

import pytest

from boundmem.consent.local import LocalConsentDetector, consent_clause, consent_clauses
from boundmem.models import Conversation, Turn

OPT_OUTS = {
    "stop remembering where I like to eat": "points_of_interest/restaurant",
    "don't keep track of my music": "entertainment_and_media/music",
    "Hey car, please stop remembering my music.": "entertainment_and_media/music",
    "I don't want you to remember where I park": "navigation_and_routing/parking",
    "Never save anything about my radio stations": "entertainment_and_media/radio_and_podcasts/preferred_radio_station",
    "Don't store my parking preferences from now on": "navigation_and_routing/parking",
    "no longer track what I eat": "points_of_interest/restaurant",
    "stop saving my seat heating": "vehicle_settings_and_comfort/climate_control/seat_heating_preferences",
}
DELETES = {
    "forget my music preferences": "entertainment_and_media/music",
    "delete what you know about my parking": "navigation_and_routing/parking",
    "Could you delete everything about parking please?": "navigation_and_routing/parking",
    "can you forget my music preferences?": "entertainment_and_media/music",
    "Um, forget what you know about my seat heating": "vehicle_settings_and_comfort/climate_control/seat_heating_preferences",
    "forget that I like jazz": "entertainment_and_media/music/favorite_genres",
    "clear my charging preferences": "points_of_interest/charging_station_in_public",
}
NOT_CONSENT = [
    "I like to eat Italian", "do you remember my music?", "stop the music", "do you remember where I like to eat?",
    "I always forget my keys.", "don't forget my music preferences", "forget the parking, let's go home",
    "delete the route", "stop recording", "stop remembering it", "forget it", "what do you store about my music?",
    "Did you forget my music preferences?", "Stop navigation.", "remove the list of things to do",
    "I never remember where I parked", "stop at the next restaurant", "don't play my music",
    # things a car saves, records or keeps: commands, not consent
    "don't save the route", "stop recording the trip", "stop keeping the seat warm", "keep the temperature at 21",
    "don't save this destination", "clear my climate settings",
]


def _one(detector, text, schema):
    return detector.detect(Conversation(id="c", turns=(Turn(role="user", text=text),)), schema)


@pytest.mark.parametrize("embedder", ["hash", "minilm"])
def test_opt_outs_and_deletions_are_recognised_with_their_category(embedder, schema, hash_embedder, request):
    det = LocalConsentDetector(hash_embedder if embedder == "hash" else request.getfixturevalue("minilm"))
    for kind, cases in (("opt_out", OPT_OUTS), ("delete", DELETES)):
        for text, prefix in cases.items():
            found = _one(det, text, schema)
            assert [(r.kind, r.prefix) for r in found] == [(kind, prefix)], text
            assert found[0].utterance == text and found[0].turn == 0


@pytest.mark.parametrize("embedder", ["hash", "minilm"])
def test_preferences_questions_and_commands_are_no_consent(embedder, schema, hash_embedder, request):
    det = LocalConsentDetector(hash_embedder if embedder == "hash" else request.getfixturevalue("minilm"))
    for text in NOT_CONSENT:
        assert _one(det, text, schema) == [], text


def test_a_consent_verb_about_something_the_schema_does_not_hold_changes_nothing(schema, minilm):
    det = LocalConsentDetector(minilm)
    for text in ("stop tracking my location", "forget my calendar data", "don't remember my kids' names",
                 "delete what you know about my contacts"):
        assert consent_clause(consent_clauses(text)[0]) is not None
        assert _one(det, text, schema) == [], text


def test_only_the_consent_turn_is_marked_and_a_second_clause_is_read(schema, hash_embedder):
    det = LocalConsentDetector(hash_embedder)
    conv = Conversation(id="c", turns=(Turn(role="user", text="I love jazz."),
                                       Turn(role="assistant", text="Noted. Stop remembering anything?"),
                                       Turn(role="user", text="Play something. And stop remembering where I like to eat!")))
    found = det.detect(conv, schema)
    assert [(r.kind, r.prefix, r.turn) for r in found] == [("opt_out", "points_of_interest/restaurant", 2)]
    assert det.mentions_consent(conv)
    assert not det.mentions_consent(Conversation(id="d", turns=(Turn(role="user", text="do you remember my music?"),)))


def test_no_false_consent_on_carmem_slurp_and_the_challenge_sets(shared_data, schema, minilm):
    """26k real user and assistant lines (CarMem, SLURP devel voice commands, the challenge sets) hold no consent
    request: the detector must find none that resolves to a category."""
    import glob
    import json

    texts: list[str] = []

    def walk(x):
        if isinstance(x, str):
            texts.append(x)
        elif isinstance(x, list):
            for y in x:
                walk(y)
        elif isinstance(x, dict):
            for k, v in x.items():
                if k not in ("user_preferences", "user_profile", "user_uuid"):
                    walk(v)

    for line in open(shared_data / "carmem" / "dataset.jsonl"):
        walk(json.loads(line))
    slurp = shared_data / "slurp" / "devel.jsonl"
    if slurp.exists():
        texts.extend(json.loads(line)["sentence"] for line in open(slurp))
    from boundmem_bench import challenge_sets as challenge_data

    for f in glob.glob(str(challenge_data.__file__).rsplit("/", 1)[0] + "/challenge_data/*.jsonl"):
        for line in open(f):
            walk(json.loads(line))
    assert len(texts) > 10_000
    det = LocalConsentDetector(minilm)
    hits = []
    for t in texts:
        for c in consent_clauses(t):
            found = consent_clause(c)
            if found and det.resolve(found[1], schema):
                hits.append(t)
    assert hits == []
