"""The library swaps keep the behaviour: spoken numbers by text2num (retrieve/vocabulary.spoken_numbers) and
the English detector by py3langid (extract/speech.is_english). The hand-written versions they replaced are kept
here as the reference; where the two differ, the case is listed (mostly where the library is right, and the known
price where it is not)."""
from __future__ import annotations

import re

import pytest

from boundmem.extract.speech import is_english
from boundmem.retrieve.vocabulary import spoken_numbers

_UNITS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                                     "fourteen fifteen sixteen seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split())
         if w != "_"}


def old_spoken_numbers(text: str) -> set[str]:
    words = re.findall(r"[a-z]+", text.lower())
    out: set[str] = set()
    for i, w in enumerate(words):
        if w in _TENS:
            nxt = words[i + 1] if i + 1 < len(words) else ""
            out.add(str(_TENS[w] + (_UNITS[nxt] if nxt in _UNITS and 0 < _UNITS[nxt] < 10 else 0)))
        elif w in _UNITS and (i == 0 or words[i - 1] not in _TENS):
            out.add(str(_UNITS[w]))
    return out


def said(n: int) -> str:
    if n < 20:
        return next(w for w, i in _UNITS.items() if i == n)
    tens = next(w for w, i in _TENS.items() if i == n - n % 10)
    return tens if n % 10 == 0 else f"{tens} {said(n % 10)}"


def as_caller(fn, text: str) -> set[str]:
    """What vocabulary._number_match compares: digits in the text joined with the spoken numbers."""
    return set(re.findall(r"\d+(?:\.\d+)?", text.lower())) | fn(text)


@pytest.mark.parametrize("n", range(100))
def test_every_number_under_a_hundred_reads_as_before(n):
    for text in (said(n), f"set it to {said(n)} degrees", f"{said(n).upper()} please", said(n).replace(" ", "-")):
        assert spoken_numbers(text) == old_spoken_numbers(text) == {str(n)}, text


@pytest.mark.parametrize("text", [
    "set the temperature to twenty two degrees", "fan on level two please", "two or three stops at most",
    "I always keep it at twenty one", "turn the volume to seven", "the second one, please", "I like 21 degrees",
    "nineteen eighty four", "no one likes highways", "first stop the bakery", "Twenty Two degrees, always",
    "I'd like it at twenty-two", "put the seat heating on three", "someone called", "a zero emission car",
])
def test_car_requests_read_the_same_numbers(text):
    assert as_caller(spoken_numbers, text) == as_caller(old_spoken_numbers, text)


@pytest.mark.parametrize("text, old, new", [
    ("play ninety three point five fm", {"93", "5"}, {"93.5"}),          # a station is one number
    ("Put on VibeVault eighty eight point three", {"88", "3"}, {"88.3"}),  # (the one CarMem turn that differs)
    ("turn on channel nine hundred and fifty one", {"9", "51"}, {"951"}),
    ("set an alarm on the twenty fifth at five", {"20", "5"}, {"5"}),      # an ordinal is a date, not a 20
])
def test_where_the_library_differs_it_reads_the_number_that_was_said(text, old, new):
    assert as_caller(old_spoken_numbers, text) == old and as_caller(spoken_numbers, text) == new


def test_words_text2num_would_misread_are_no_numbers():
    assert spoken_numbers("only show me the ones with the cheapest fuel") == set()
    assert spoken_numbers("wake me at twelve o clock") == {"12"}
    assert spoken_numbers("less than a five-minute walk") == {"5"}


_OLD_ENGLISH = frozenset((
    "i me my mine we our you your he she it they them the a an and or but if so to of in on at for with from by "
    "is are was were be been am do does did don't doesn't not no never always usually like love prefer hate want "
    "play set turn make find take go get put please can could would will should what where when who how which "
    "this that these those there here some any all more less much very really just only also too then than now "
    "music song radio light lights car route parking food restaurant home work temperature news podcast "
    "i'm i'd i've it's that's what's let's can't won't up down off over about as into out again").split())


def old_is_english(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return False
    if sum(1 for c in letters if not c.isascii()) > 0.3 * len(letters):
        return False
    words = [w.lower() for w in re.findall(r"[a-z]+(?:'[a-z]+)?", text, re.I)]
    if len(words) < 4:
        return True
    return sum(1 for w in words if w in _OLD_ENGLISH) >= 0.2 * len(words)


ENGLISH = ["I always go for Italian food when I can", "olly um i always go for jazz", "play jazz", "Café Müller",
           "set the temperature to twenty two degrees and keep it there", "I never take the highway to work",
           "Please find me a charging station with a fast DC charger", "yes", "ok google what's the weather like"]
NOT_ENGLISH = ["Ich höre am liebsten Jazz und fahre nie über die Autobahn.",
               "Je préfère toujours la cuisine italienne quand on s'arrête pour manger.",
               "Siempre pago con tarjeta en las estaciones de carga.",
               "Preferisco la musica classica quando guido di notte.",
               "Ik rijd liever niet over de snelweg als het druk is.",
               "我最喜欢听爵士乐，开车的时候总是听。", "Я всегда выбираю итальянскую кухню.",
               "Ελληνικά: προτιμώ πάντα τη θάλασσα.", "", "1234 !!"]


@pytest.mark.parametrize("text", ENGLISH)
def test_english_turns_are_read_as_before(text):
    assert is_english(text) and old_is_english(text)


@pytest.mark.parametrize("text", NOT_ENGLISH)
def test_other_languages_are_refused_as_before(text):
    assert not is_english(text) and not old_is_english(text)


@pytest.mark.parametrize("text, old, new", [
    ("Kannst du mir ein gutes italienisches Restaurant in der Nähe suchen?", True, False),   # 'in', 'restaurant'
    ("Need charging station nearby", False, True),            # few of the 130 words, all English
    ("Locate charging station with restroom facilities", False, True),
    # the price: a few short spoken requests of names py3langid reads as another language (on CarMem + SLURP +
    # GVD, 5 of 2,321 English turns refused where the word list refused 38; held-out 3 of 2,399 where it refused 45)
    ("does peking garden deliver", True, False),
])
def test_where_the_library_differs(text, old, new):
    assert (old_is_english(text), is_english(text)) == (old, new)
