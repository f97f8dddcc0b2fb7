"""Local (no-LLM) stand-ins for TiM's inductive thoughts: a compressed, deterministic statement of one turn.

TiM asks the LLM for short relation-style statements after every answer. Without an LLM we keep the user's words
(first sentences) and the most informative sentences of the reply (the ones naming things: capitalised words,
quoted titles, numbers), clipped. It keeps provenance exact and is honest about what a local run can do: it is a
compression of the turn, not an inference from it.
"""
from __future__ import annotations

import re
from typing import Optional

from boundmem.caim.base import DialogueTurn

from ._common import clip, sentences

_QUOTED = re.compile(r"[\"“《]([^\"”》]{3,60})[\"”》]")
_CAP_PHRASE = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]+(?:\s+(?:of|the|and|de|da)?\s*[A-Z][a-z]+)*)")
_STOP_HEADS = {
    "i", "ai", "hello", "hi", "yes", "no", "thank", "thanks", "ok", "okay", "today", "yesterday", "tomorrow",
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
    "december", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "english", "chinese",
}
_NEGATION = re.compile(r"\b(not|never|no longer|don't|doesn't|didn't|dislike|hate|can't stand)\b|n't\b", re.I)


def _salience(sentence: str) -> int:
    caps = len(re.findall(r"(?<!^)\b[A-Z][a-z]+", sentence))
    return caps + 2 * len(_QUOTED.findall(sentence)) + len(re.findall(r"\d", sentence))


def local_thought(turn: DialogueTurn, user: str, max_chars: int = 320) -> str:
    said = clip(" ".join(sentences(turn.query)[:2]), max_chars // 2)
    reply = sentences(turn.response)
    picked: list[str] = reply[:1]
    rest = sorted(reply[1:], key=lambda s: -_salience(s))
    if rest and _salience(rest[0]) > 0:
        picked.append(rest[0])
    text = f"{user} said: {said}"
    if picked:
        text += f" AI: {' '.join(picked)}"
    return clip(text, max_chars)


def head_entity(text: str, user: str) -> Optional[str]:
    """The thing a statement is about, for TiM's merge-by-head: a quoted title, else a capitalised name."""
    m = _QUOTED.search(text)
    if m:
        return m.group(1).strip().lower()
    own = {w.lower() for w in user.split()}
    for m in _CAP_PHRASE.finditer(text):
        phrase = m.group(1).strip()
        words = phrase.lower().split()
        if words[0] in _STOP_HEADS or set(words) <= own or len(phrase) < 4:
            continue
        return phrase.lower()
    return None


def negated(text: str) -> bool:
    """Whether the user's side of a thought is negative; the AI's reply ("I can't go there") is not the user's stance."""
    return bool(_NEGATION.search(text.split(" AI: ", 1)[0]))
