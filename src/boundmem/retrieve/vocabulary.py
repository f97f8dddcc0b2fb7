"""Attribute-vocabulary matching: the schema's own words found in a user's sentence.

MiniLM has never seen fictional brand names ("PetroLux", "EcoPulse Energy"), so an exact
vocabulary hit is evidence the embedding alone cannot give. Only *distinctive* terms count
(a term listed under one or two categories); "Low"/"Yes" appear everywhere and say nothing.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable, Sequence

from text_to_num import alpha2digit

_GENERIC = {"yes", "no", "low", "medium", "high", "normal", "other", "none", "any"}


def term_of(attribute: str) -> str:
    """The matchable part of an attribute: text before a parenthesis, lower-cased."""
    return attribute.split("(")[0].strip().lower()


def is_name(attribute: str) -> bool:
    """Proper-name-like vocabulary ("PetroLux", "EcoPulse Energy", "Max Jettison (Pop)"), not a common word."""
    words = term_of(attribute.replace("/", " ")).split() and attribute.split("(")[0].replace("/", " ").split()
    if any(re.search(r"[a-z][A-Z]", w) for w in words):
        return True
    return len(words) > 1 and all(w[:1].isupper() or w[:1].isdigit() for w in words)


@lru_cache(maxsize=4096)   # built per attribute on every candidate otherwise
def _pattern(term: str) -> re.Pattern:
    """The term as a whole word or phrase, in the plural or the singular too ("hostels" for "Hostel",
    "beach" for "Beaches")."""
    if not term[-1:].isalpha():
        return re.compile(r"(?<![0-9a-z])" + re.escape(term) + r"(?![0-9a-z])")
    if term.endswith("ies") and len(term) > 5:   # "allergies" is also said "allergy"
        return re.compile(r"(?<![0-9a-z])" + re.escape(term[:-3]) + r"(?:y|ies)(?![0-9a-z])")
    stem = term[:-2] if term.endswith(("ches", "shes", "sses", "xes")) else term[:-1] if term.endswith("s") and len(term) > 3 else term
    # one word of four letters or more is also said as a comparative ("cheaper" for "cheap")
    ending = r"(?:s|es|er)?" if " " not in stem and len(stem) >= 4 else r"(?:s|es)?"
    return re.compile(r"(?<![0-9a-z])" + re.escape(stem) + ending + r"(?![0-9a-z])")


class VocabularyIndex:
    """Distinctive attribute terms -> the categories (by row index) that list them."""

    def __init__(self, vocabularies: Sequence[Iterable[str]], max_owners: int = 2):
        owners: dict[str, set[int]] = {}
        for i, attrs in enumerate(vocabularies):
            for a in attrs:
                for t in self._terms(a):
                    owners.setdefault(t, set()).add(i)
        named: set[str] = set()
        for attrs in vocabularies:
            for a in attrs:
                if is_name(a):
                    named.update(self._terms(a))
        self.n = len(vocabularies)
        self._terms_owned = [(t, _pattern(t), sorted(o), t in named) for t, o in owners.items() if len(o) <= max_owners]

    @staticmethod
    def _terms(attribute: str) -> list[str]:
        t = term_of(attribute)
        if len(t) < 2 or t in _GENERIC:
            return []
        out = [t]
        words = t.split()
        # "EcoPulse Energy" is often just "EcoPulse" in speech
        if len(words) > 1 and len(words[0]) >= 5:
            out.append(words[0])
        return out

    def hit_parts(self, sentence: str) -> tuple[list[float], list[float]]:
        """Per category, uncapped: the proper-name hits and the common-word hits (see `hits`).
        One scan of the terms serves every weighting of common words."""
        low = sentence.lower()
        names, common = [0.0] * self.n, [0.0] * self.n
        for term, pat, own, name in self._terms_owned:
            if term in low and pat.search(low):   # substring test first: ~100 terms per sentence
                v = names if name else common
                for i in own:
                    v[i] += 1.0 / len(own)
        return names, common

    def hits(self, sentence: str, common_weight: float = 1.0) -> list[float]:
        """Per category: 1/(number of owners) for each distinctive term present, capped at 1.

        Common words ("cool", "blue", "jazz") count `common_weight`, proper names (brands, stations,
        artists) fully: a common word is often used in another sense ("I like it cool") or, in a bare
        command, is the setting asked for now, while a brand name is still a choice."""
        names, common = self.hit_parts(sentence)
        return [min(1.0, a + common_weight * b) for a, b in zip(names, common)]


def spellings(term: str) -> list[str]:
    """A vocabulary term and the ways a user says it: "local markets/farms" is also "local markets",
    "local farms" and "farms"."""
    if "-" in term:   # "in-car system" is also said "in car system"
        return list(dict.fromkeys([*spellings(term.replace("-", " ")), term]))
    if "/" not in term:
        return [term]
    parts = [p.strip() for p in term.split("/") if p.strip()]
    head = parts[0].split()[:-1]
    out = [term, *parts]
    out += [" ".join(head + [p]) for p in parts[1:] if head and len(p.split()) == 1]
    return list(dict.fromkeys(out))


def find_term(sentence_low: str, term: str) -> re.Match | None:
    """Where the lower-cased sentence names a vocabulary term (any of its spellings, singular or plural)."""
    for t in spellings(term):
        m = _pattern(t).search(sentence_low)
        if m:
            return m
    return None


def _number_match(sentence_low: str, attributes: Sequence[str]) -> str | None:
    """The attribute whose number is said ("21 degrees", "twenty one degrees"), if any."""
    nums = set(re.findall(r"\d+(?:\.\d+)?", sentence_low)) | spoken_numbers(sentence_low)
    for a in attributes:
        an = re.findall(r"\d+(?:\.\d+)?", term_of(a))
        if an and an[0] in nums:
            return a
    return None


def _aliases(attribute: str, term: str) -> list[str]:
    """How a listed name is said for short: the full term, a song's title without "by <artist>", a multi-word
    brand by its distinctive first word ("VoltRise" for "VoltRise Charging")."""
    out = [term]
    if " by " in term:
        out.append(term.split(" by ")[0].strip())
    words = term.split()
    if len(words) > 1 and len(words[0]) >= 5 and is_name(attribute):
        out.append(words[0])
    return out


def literal_attributes(sentence: str, attributes: Sequence[str]) -> list[str]:
    """Every attribute of one category named in the sentence, in the order they are said; a term
    inside a longer named one ("rock" in "folk rock" when both are items) counts once, as the longer."""
    low = sentence.lower()
    found: list[tuple[int, int, str]] = []
    for a in attributes:
        t = term_of(a)
        if len(t) < 2 or t in ("yes", "no"):
            continue
        for alias in _aliases(a, t):
            m = find_term(low, alias)
            if m:
                found.append((m.start(), m.end(), a))
                break
    found.sort(key=lambda f: (f[0], -(f[1] - f[0])))
    out: list[str] = []
    last_end = -1
    for start, end, a in found:
        if start < last_end:
            continue
        out.append(a)
        last_end = end
    if not out:
        one = _number_match(low, attributes)
        return [one] if one else []
    return out


# a number text2num wrote as digits: not one glued to letters ("1st" is an ordinal it read, "21st" one we were given)
_DIGITS = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])")
# words text2num reads as numbers that are none here ("the ones I like": 1, "twelve o clock": 0), and the hyphen
# of a compound it would not read ("a five-minute walk"; "twenty two" reads as "twenty-two" does)
_NOT_NUMBERS = re.compile(r"\b(?:ones|o)\b|(?<=[a-z])-(?=[a-z])")


def spoken_numbers(text: str) -> set[str]:
    """Numbers said in words, as digits ("twenty two degrees" -> "22"), by text2num (every number, `threshold=0`:
    speech transcripts rarely use digits, and "set the fan to two" is a number); digits already in the text come
    back too (the caller joins both)."""
    return set(_DIGITS.findall(alpha2digit(_NOT_NUMBERS.sub(" ", text.lower()), "en", threshold=0)))
