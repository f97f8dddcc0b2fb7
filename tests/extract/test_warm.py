"""warm(): everything schema-dependent is embedded up front, so a live call embeds only the user's own turns."""
from __future__ import annotations

from boundmem.extract.local import LocalExtractor
from boundmem.models import Conversation, Turn
from boundmem.embed import HashEmbedder


class Recording(HashEmbedder):
    def __init__(self):
        super().__init__()
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        return super().embed(texts)


CONV = Conversation(id="c", turns=(Turn(role="user", text="I always prefer covered parking near the office."),
                                   Turn(role="assistant", text="Noted."),
                                   Turn(role="user", text="I usually like it quite warm, around 23 degrees.")))


def test_after_warm_a_call_embeds_only_the_users_turns(schema):
    emb = Recording()
    ex = LocalExtractor(emb)
    ex.warm(schema)
    warmed = sum(len(c) for c in emb.calls)
    n_attrs = sum(len(r.detail.attributes) for r in schema.details())
    assert warmed >= n_attrs            # the vocabulary (and zero-shot prototypes) went in during warm()
    emb.calls.clear()
    found = ex.extract(CONV, schema).candidates
    assert found, "the conversation states preferences"
    embedded = [t for c in emb.calls for t in c]
    said = [t.text for t in CONV.turns if t.role == "user"]
    assert embedded and all(any(e in t for t in said) for e in embedded)   # the user's words (whole turns or clauses)


def test_without_warm_the_first_call_pays_for_the_schema(schema):
    emb = Recording()
    ex = LocalExtractor(emb)
    ex.extract(CONV, schema)
    assert sum(len(c) for c in emb.calls) > 2
