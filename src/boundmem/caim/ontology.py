"""The fixed tag vocabulary CAIM files thoughts under (category / subcategory / attribute).

CAIM bounds what long-term memory may hold to an operator-chosen ontology; every thought and every
query gets at most three tags from it. The paper's own tag list is not public, so
`data/ontology-v1.json` is ours, versioned, and sized to GVD's everyday-companion dialogues.
Tags are strings "Category/Subcategory/attribute" so they survive JSON, SQLite and LLM prompts unchanged.
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Iterable, Union

from pydantic import BaseModel, Field, ValidationError

from ..errors import InputError


class OntologyError(InputError):
    """An ontology file is malformed or a tag is not in the ontology."""


class Attribute(BaseModel):
    key: str = Field(min_length=1, pattern=r"^[^/]+$")
    description: str
    keywords: list[str] = []


class Subcategory(BaseModel):
    key: str = Field(min_length=1, pattern=r"^[^/]+$")
    description: str = ""
    attributes: list[Attribute] = Field(min_length=1)


class Category(BaseModel):
    key: str = Field(min_length=1, pattern=r"^[^/]+$")
    description: str = ""
    subcategories: list[Subcategory] = Field(min_length=1)


class TagInfo(BaseModel):
    tag: str
    category: str
    subcategory: str
    attribute: str
    description: str
    keywords: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """What an embedder compares a query against."""
        return f"{self.category} {self.subcategory}: {self.description}"


class Ontology(BaseModel):
    name: str
    version: int
    note: str = ""
    categories: list[Category] = Field(min_length=1)

    def model_post_init(self, _ctx) -> None:
        seen: dict[str, TagInfo] = {}
        for c in self.categories:
            for s in c.subcategories:
                for a in s.attributes:
                    tag = f"{c.key}/{s.key}/{a.key}"
                    if tag in seen:
                        raise OntologyError(f"duplicate tag {tag!r}")
                    seen[tag] = TagInfo(tag=tag, category=c.key, subcategory=s.key, attribute=a.key,
                                        description=a.description, keywords=tuple(k.lower() for k in a.keywords))
        self._tags = seen
        self._lower = {t.lower(): t for t in seen}

    @property
    def tags(self) -> list[str]:
        return list(self._tags)

    def info(self, tag: str) -> TagInfo:
        return self._tags[self.normalize(tag)]

    def infos(self) -> list[TagInfo]:
        return list(self._tags.values())

    def normalize(self, tag: str) -> str:
        """The canonical spelling of `tag`; OntologyError naming it if it is not in the ontology."""
        t = self._lower.get(str(tag).strip().strip("/").lower())
        if t is None:
            raise OntologyError(f"tag {tag!r} is not in ontology {self.name} v{self.version}")
        return t

    def valid(self, tags: Iterable[str], limit: int = 3) -> list[str]:
        """Known tags only, canonical, deduplicated, at most `limit` (for cleaning LLM output)."""
        out: list[str] = []
        for t in tags:
            try:
                n = self.normalize(t)
            except OntologyError:
                continue
            if n not in out:
                out.append(n)
        return out[:limit]

    def listing(self) -> str:
        """One tag per line with its description: the menu an LLM chooses from."""
        return "\n".join(f"{i.tag}: {i.description}" for i in self._tags.values())


def load_ontology(path: Union[str, Path]) -> Ontology:
    p = Path(path)
    try:
        raw = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise OntologyError(f"{p}: cannot read ontology: {e}") from e
    try:
        return Ontology.model_validate(raw)
    except ValidationError as e:
        raise OntologyError(f"{p}: invalid ontology: {e}") from e


@lru_cache(maxsize=4)
def builtin_ontology(version: int = 1) -> Ontology:
    src = resources.files("boundmem.caim").joinpath(f"data/ontology-v{version}.json")
    try:
        return Ontology.model_validate(json.loads(src.read_text()))
    except FileNotFoundError as e:
        raise OntologyError(f"no built-in ontology v{version}") from e


def tag_overlap(a: str, b: str) -> int:
    """3 = same attribute, 2 = same subcategory, 1 = same category, 0 = unrelated."""
    pa, pb = a.split("/"), b.split("/")
    n = 0
    for x, y in zip(pa, pb):
        if x != y:
            break
        n += 1
    return n


def best_overlap(query_tags: Iterable[str], thought_tags: Iterable[str]) -> int:
    tt = list(thought_tags)
    return max((tag_overlap(q, t) for q in query_tags for t in tt), default=0)


__all__ = ["Ontology", "OntologyError", "TagInfo", "load_ontology", "builtin_ontology", "tag_overlap", "best_overlap"]
