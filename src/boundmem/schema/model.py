"""The category schema: the only things boundmem is allowed to remember.

A schema is a three-level tree (main > sub > detail). Everything downstream (the tool
definition an LLM is forced to call, the local extractor's prototypes, the store's
opt-out checks) is derived from this one object, so a category that is not here cannot
be extracted, stored or recalled.
"""
from __future__ import annotations

import hashlib
import re
from functools import cached_property
from typing import Iterable, Iterator, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from ..errors import InputError
from .display import clean_label


def slug(name: str) -> str:
    """A stable snake_case key for a display name ("Charging Station(in public)" -> "charging_station_in_public")."""
    s = re.sub(r"[^0-9a-zA-Z]+", "_", name.strip()).strip("_").lower()
    return s or "_"


APPLIES_TO = ("Kinds of request the category's preferences matter to although the request does not name the category "
              "(a road-type avoidance applies to routing, a diet to food). A kind the recall gate knows (routing, food, "
              "lodging, shopping, travel: retrieve/implied.py) recalls a held item of the category for every request of "
              "that kind; any other entry is a phrase the gate reads a request close to as asking about the category. "
              "Optional.")
LABEL = ("What an end user reads for the category (the transparency page, the CLI): the name itself is written for "
         "the extractor. Unset: the name with its parenthetical notes dropped (`display.clean_label`).")


class DetailCategory(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    key: str = ""
    label: str = Field("", description=LABEL)
    multiple: bool = Field(description="True if several preferences may be held at once (MP), False if only one (MNP).")
    description: str = ""
    attributes: tuple[str, ...] = ()
    value_labels: dict[str, str] = Field(default_factory=dict, description=(
        "What an end user reads for a value, where the value itself (as stored, and as the extractor matches it) "
        "reads badly: {'22 degree Celcius': '22 °C'}. Wording only: stored rows keep the value, so fixing a typo "
        "here needs no migration (the schema's fingerprint leaves it out)."))
    examples: tuple[str, ...] = ()
    applies_to: tuple[str, ...] = Field((), description=APPLIES_TO)
    values: Optional[Literal["open", "closed"]] = Field(None, description=(
        "closed: a value is one of `attributes` (price range, Yes/No, Low/Medium/High); open: `attributes` are "
        "examples and a value is the user's own words (songs, artists, chains, stations, cuisines). Unset: closed when "
        "the category lists attributes, open when it lists none (see `value_kind`)."))

    @model_validator(mode="before")
    @classmethod
    def _default_key(cls, data):
        if isinstance(data, dict) and data.get("name"):
            if not data.get("key"):
                data = {**data, "key": slug(str(data["name"]))}
            if not data.get("label"):
                data = {**data, "label": clean_label(str(data["name"]))}
        return data

    def __hash__(self) -> int:
        """Frozen categories are dictionary keys (the LLM extractor caches by schema); `value_labels` is a dict, the
        YAML's own shape, so it is hashed as its items."""
        return hash(tuple((k, tuple(sorted(v.items())) if isinstance(v, dict) else v) for k, v in self.__dict__.items()))

    @model_validator(mode="after")
    def _labels_name_listed_values(self):
        stray = sorted(set(self.value_labels) - set(self.attributes))
        if stray:
            raise ValueError(f"value_labels of {self.name!r} name values it does not list in attributes: {stray}")
        return self

    @property
    def value_kind(self) -> Literal["open", "closed"]:
        """The category's value kind, explicit or by default. The default is closed where there is a list because a
        closed category can only miss a value the user named outside it, while treating a list of options as
        examples could store words that are not an option; a schema whose lists are examples says `values: open`."""
        if self.values is not None:
            return self.values
        return "closed" if self.attributes else "open"


class SubCategory(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    key: str = ""
    label: str = Field("", description=LABEL)
    description: str = ""
    applies_to: tuple[str, ...] = Field((), description=APPLIES_TO)
    details: tuple[DetailCategory, ...]

    _default_key = model_validator(mode="before")(DetailCategory._default_key.__func__)


class MainCategory(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    key: str = ""
    label: str = Field("", description=LABEL)
    description: str = ""
    subs: tuple[SubCategory, ...]

    _default_key = model_validator(mode="before")(DetailCategory._default_key.__func__)


class CategoryPath(BaseModel):
    """Where a preference lives: keys of main, sub and detail category."""

    model_config = ConfigDict(frozen=True)

    main: str
    sub: str
    detail: str

    def __str__(self) -> str:
        return f"{self.main}/{self.sub}/{self.detail}"

    def within(self, prefix: str) -> bool:
        """True if this path lies under a prefix like "main", "main/sub" or "main/sub/detail"."""
        parts = [p for p in prefix.strip("/").split("/") if p]
        return list((self.main, self.sub, self.detail))[: len(parts)] == parts


class DetailRef(BaseModel):
    """A detail category together with its ancestors, so callers need not walk the tree."""

    model_config = ConfigDict(frozen=True)

    main: MainCategory
    sub: SubCategory
    detail: DetailCategory

    @property
    def path(self) -> CategoryPath:
        return CategoryPath(main=self.main.key, sub=self.sub.key, detail=self.detail.key)

    @property
    def label(self) -> str:
        """The category as an end user reads it: "Main > Sub > Detail" in labels."""
        return f"{self.main.label} > {self.sub.label} > {self.detail.label}"


class UnknownCategoryError(InputError, KeyError):
    """A category key, name or path the schema does not hold. Bad input; a KeyError too, as it always was."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it readable
        return str(self.args[0]) if self.args else "unknown category"


class Schema(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "schema"
    version: str = "1"
    description: str = ""
    mains: tuple[MainCategory, ...]
    _unpruned: Optional["Schema"] = PrivateAttr(default=None)

    @property
    def unpruned(self) -> "Schema":
        """The operator's whole schema this one was pruned from (itself if it was not): an extractor reads a turn
        against every category, so words about an opted-out one are dropped, not filed under a neighbour."""
        return self._unpruned or self

    @model_validator(mode="after")
    def _unique_keys(self):
        if not self.mains:
            raise ValueError("schema defines no categories")
        seen: dict[str, str] = {}
        for ref in self.details():
            p = str(ref.path)
            if p in seen:
                raise ValueError(f"duplicate category path {p!r}")
            seen[p] = ref.detail.name
        for m in self.mains:
            if not m.subs:
                raise ValueError(f"main category {m.name!r} has no subcategories")
            for s in m.subs:
                if not s.details:
                    raise ValueError(f"subcategory {m.name}/{s.name} has no detail categories")
        return self

    # --- navigation -------------------------------------------------------------------
    @cached_property
    def _refs(self) -> tuple[DetailRef, ...]:
        # built once per (immutable) schema: resolve() sits on the ingest hot path
        return tuple(DetailRef(main=m, sub=s, detail=d) for m in self.mains for s in m.subs for d in s.details)

    @cached_property
    def _by_name(self) -> dict[str, DetailRef]:
        idx: dict[str, DetailRef] = {}
        for d in reversed(self._refs):  # first definition wins on a clash of key/name across subs
            for name in (d.detail.name, d.detail.key, str(d.path)):
                idx[name] = d
        return idx

    def details(self) -> Iterator[DetailRef]:
        return iter(self._refs)

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 (16 hex digits) of the category tree as stored rows refer to it: every detail path and whether it
        holds one preference or several. Wording (names, descriptions, attributes, examples) is left out, so fixing
        a description does not make a store refuse its own schema; a category added, removed or re-keyed does."""
        tree = sorted(f"{ref.path}:{int(ref.detail.multiple)}" for ref in self._refs)
        return hashlib.sha256("\n".join(tree).encode("utf-8")).hexdigest()[:16]

    def counts(self) -> tuple[int, int, int]:
        return (len(self.mains), sum(len(m.subs) for m in self.mains), sum(1 for _ in self.details()))

    def resolve(self, ref: str | CategoryPath) -> DetailRef:
        """Find a detail category by path ("main/sub/detail"), by key, or by display name."""
        if isinstance(ref, CategoryPath):
            ref = str(ref)
        want = ref.strip().strip("/")
        d = self._by_name.get(want) or self._by_name.get(slug(want))
        if d is not None:
            return d
        raise UnknownCategoryError(f"unknown detail category {ref!r} in schema {self.name!r}")

    def resolve_prefix(self, ref: str) -> str:
        """Normalise a main, sub or detail reference (key, name or path) to a canonical path prefix."""
        want = ref.strip().strip("/")
        for m in self.mains:
            if want in (m.key, m.name) or slug(want) == m.key:
                return m.key
            for s in m.subs:
                if want in (f"{m.key}/{s.key}", s.key, s.name) or slug(want) == s.key:
                    return f"{m.key}/{s.key}"
        return str(self.resolve(want).path)

    # --- opt-out ----------------------------------------------------------------------
    def prune(self, opted_out: Iterable[str]) -> "Schema":
        """The schema a user agreed to: opted-out mains, subs or details removed.

        Empty parents are dropped too, because an extractor must not see a category
        it cannot fill (the paper removes the subcategory field from its parent).
        """
        prefixes = [self.resolve_prefix(o) for o in opted_out]
        if not prefixes:
            return self

        def gone(path: str) -> bool:
            return any(path == p or path.startswith(p + "/") for p in prefixes)

        mains = []
        for m in self.mains:
            if gone(m.key):
                continue
            subs = []
            for s in m.subs:
                sp = f"{m.key}/{s.key}"
                if gone(sp):
                    continue
                ds = tuple(d for d in s.details if not gone(f"{sp}/{d.key}"))
                if ds:
                    subs.append(s.model_copy(update={"details": ds}))
            if subs:
                mains.append(m.model_copy(update={"subs": tuple(subs)}))
        pruned = Schema.model_construct(name=self.name, version=self.version, description=self.description,
                                        mains=tuple(mains))
        pruned._unpruned = self.unpruned
        return pruned

    def allows(self, path: CategoryPath | str) -> bool:
        try:
            self.resolve(str(path))
            return True
        except UnknownCategoryError:
            return False
