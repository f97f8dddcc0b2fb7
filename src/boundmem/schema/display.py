"""What an end user reads for a category and a held value: the transparency page, the CLI and the API's answers
all word it here, so "Dislikes: Jazz" reads the same everywhere.

Category names are written for the extractor, and CarMem's carry annotator notes ("Charging Station(in public)",
"... everyday points (f.e. work, grocery, restaurant)") and typos ("Interior Lightning Color Preferences"). A schema
can give each category a `label` for people; without one, `clean_label` drops what is safe to drop generically
(parenthetical notes, which in these schemas scope or exemplify a category for the model and are repeated in its
description) and keeps every word of the name otherwise: fixing a spelling generically could turn one real word into
another, so a typo is fixed by the schema's `label`, not here.

Polarity is data (`like`, `dislike`, `indifferent`), worded against the category: a like in an avoidance category
("Avoidance of Specific Road Types" = Highways) is something the user avoids, and must not read as a liking.
"""
from __future__ import annotations

import re
from typing import Any, Protocol


class _Resolves(Protocol):
    """What `category_labels` needs of a Schema: model.py imports this module, so naming Schema here is a cycle."""

    def resolve(self, path: Any) -> Any: ...

_PARENTHETICAL = re.compile(r"\s*\([^()]*\)")
_FOR_EXAMPLE = re.compile(r"\bf\.\s?e\.(?=\s|$)", re.I)   # a Germanism ("for example") outside parentheses
_AVOIDANCE = re.compile(r"^(?:avoid|avoidance|avoiding)\b", re.I)


def clean_label(name: str) -> str:
    """A readable label for a category name: parenthetical notes dropped, "f.e." as "e.g.", spacing tidied.
    Never empty: a name that is all note keeps its own words."""
    s = _PARENTHETICAL.sub("", name)
    s = _FOR_EXAMPLE.sub("e.g.", s)
    s = re.sub(r"\s+", " ", s).strip(" ,;:-")
    return s or " ".join(name.split())


def is_avoidance(label: str) -> bool:
    """The category records what the user avoids ("Avoidance of Specific Road Types"): its name says so first."""
    return bool(_AVOIDANCE.match(label.strip()))


_STANCE = {False: {"like": "", "dislike": "Dislikes", "indifferent": "Doesn't mind"},
           True: {"like": "Avoids", "dislike": "Does not avoid", "indifferent": "Doesn't mind"}}

_CHOICE = {False: {"like": "you chose", "dislike": "you turned down", "indifferent": "you did not mind"},
           True: {"like": "you avoided", "dislike": "you did not avoid", "indifferent": "you did not mind"}}


def stance(label: str, polarity: str) -> str:
    """The verb a held value reads with ("Dislikes", "Avoids"), or "" for a like in a category whose name already
    says it ("Favorite Cuisine": Italian; "Need for Covered Parking": Yes)."""
    return _STANCE[is_avoidance(label)].get(polarity, "")


def statement(label: str, attribute: str, polarity: str) -> str:
    """A preference as a user reads it beside its category: "Italian", "Dislikes: Jazz", "Avoids: Highways"."""
    verb = stance(label, polarity)
    return f"{verb}: {attribute}" if verb else attribute


def choice(label: str, attribute: str, polarity: str) -> str:
    """A one-off choice (an observation) as a user reads it: "you chose Jazz", "you avoided Highways"."""
    return f"{_CHOICE[is_avoidance(label)].get(polarity, 'you chose')} {attribute}"


def value_label(schema: _Resolves, path: object, attribute: str) -> str:
    """A held value as an end user reads it: the detail category's `value_labels` entry for it (a listed value's typo
    fixed for people, with the stored rows untouched), else the value itself."""
    try:
        labels = schema.resolve(path).detail.value_labels
    except KeyError:   # UnknownCategoryError: stored under another version of the schema
        return attribute
    return labels.get(attribute, attribute)


def reads(schema: _Resolves, held: Any) -> str:
    """A held preference's value as an end user reads it beside its category: "Italian", "Dislikes: Jazz", "21 °C"."""
    return statement(category_labels(schema, held.path)[-1], value_label(schema, held.path, held.attribute),
                     held.polarity)


def category_text(schema: _Resolves, path: object) -> str:
    """Sub > detail category in labels, as people read them ("Restaurant > Favorite Cuisine")."""
    return " > ".join(category_labels(schema, path)[1:])


def category_labels(schema: _Resolves, path: object) -> tuple[str, str, str]:
    """The labels of a stored value's category: (main, sub, detail). A path the schema no longer holds (stored
    under another version of it) is still shown, by its keys."""
    try:
        ref = schema.resolve(path)
    except KeyError:   # UnknownCategoryError
        keys = (str(path).split("/") + ["", "", ""])[:3]
        return keys[0], keys[1], keys[2]
    return ref.main.label, ref.sub.label, ref.detail.label
