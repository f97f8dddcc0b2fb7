"""Whether a user turn is read at all: the reader is trained on English, so a turn that is mostly not English is not
read (storing a guess from a sentence it cannot read is worse than storing nothing).
"""
from __future__ import annotations

import threading
from typing import Any, Optional

# py3langid among the languages a car's or a phone's users most often speak: over its 97 languages, lowercase spoken
# English of a few words ("does peking garden deliver") reads as Nigerian Pidgin or Latin; among these it reads as
# English
LANGUAGES = ("en", "de", "fr", "es", "it", "pt", "nl", "zh", "ja", "ru", "tr", "pl", "sv", "ko", "ar", "hi")


_LOCK = threading.Lock()
_IDENT: Optional[Any] = None


def _load_identifier():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    ident = LanguageIdentifier.from_model_file(MODEL_FILE)
    ident.set_languages(list(LANGUAGES))
    return ident


def _identifier():
    """The language-id model, loaded once under a lock (concurrent first callers wait for the one load instead of
    each loading it); read-only after set_languages: safe to share between threads."""
    global _IDENT
    if _IDENT is None:
        with _LOCK:
            if _IDENT is None:
                _IDENT = _load_identifier()
    return _IDENT


def warm() -> None:
    """Load the language-id model now (the extractor's warm() calls this), so no request waits for it."""
    _identifier()


def is_english(text: str) -> bool:
    """Whether to read the turn at all: py3langid (among `LANGUAGES`) says English.

    Two rules stay ours, one line each: a turn whose letters are mostly outside ASCII is not English whatever the
    model says (a script none of `LANGUAGES` covers would otherwise land on the nearest one); a short turn of
    ASCII words passes (under four words, names and brand words decide the model's guess)."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return False
    if sum(1 for c in letters if not c.isascii()) > 0.3 * len(letters):
        return False
    if len(text.split()) < 4:
        return True
    return _identifier().classify(text)[0] == "en"
