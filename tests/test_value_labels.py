"""A schema fixes how a listed value reads for people (`value_labels`: the bundled schema's "22 degree Celcius" reads
"22 °C") without touching stored rows: the extractor still matches the value, the store keeps it, the fingerprint is
unchanged, and the page, the CLI and the prompt's memory block show the label."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from boundmem.models import Candidate
from boundmem.retrieve.format import MemoryFormat
from boundmem.schema import builtin_schema
from boundmem.schema.display import value_label
from boundmem.schema.model import DetailCategory

PATH = "vehicle_settings_and_comfort/climate_control/preferred_temperature"


def test_the_bundled_schema_reads_the_misspelt_temperatures_in_degrees():
    s = builtin_schema()
    assert "22 degree Celcius" in s.resolve(PATH).detail.attributes        # the value the reader matches stays
    assert value_label(s, PATH, "22 degree Celcius") == "22 °C"
    assert value_label(s, PATH, "something else") == "something else"
    assert value_label(s, "gone/from/schema", "22 degree Celcius") == "22 degree Celcius"


def test_labels_are_wording_only_the_fingerprint_stays():
    s = builtin_schema()
    plain = s.model_copy(deep=True)
    data = s.model_dump()
    for m in data["mains"]:
        for sub in m["subs"]:
            for d in sub["details"]:
                d["value_labels"] = {}
    assert type(s).model_validate(data).fingerprint == s.fingerprint == plain.fingerprint


def test_a_label_for_a_value_not_listed_is_refused():
    with pytest.raises(ValidationError, match="does not list"):
        DetailCategory(name="Temp", multiple=False, attributes=("20 C",), value_labels={"21 C": "21 °C"})


def test_page_api_and_prompt_show_the_label(keyword_memory):
    from fastapi.testclient import TestClient

    from boundmem.service.app import create_app

    m = keyword_memory
    ref = m.schema.resolve(PATH)
    cand = Candidate(path=ref.path, attribute="22 degree Celcius", sentence="Set it to 22 degrees.", confidence=1.0)
    p = m.apply([cand], "acme:ann", "c1").stored[0]   # user ann of the tenant "acme"
    assert p.attribute == "22 degree Celcius"
    assert "22 °C" in MemoryFormat().preferences(m.schema, [p])
    key = "key-acme-0123456789abcdef"
    with TestClient(create_app(m, {key: "acme"})) as http:
        body = http.get("/v1/users/ann/preferences", headers={"Authorization": f"Bearer {key}"}).json()
    assert [(x["attribute"], x["display"]) for x in body["preferences"]] == [("22 degree Celcius", "22 °C")]


def test_a_schema_with_value_labels_stays_hashable():
    """The LLM extractor keys its compiled tool by schema: a dict field must not make the frozen schema unhashable."""
    from boundmem.schema import builtin_schema

    a, b = builtin_schema(), builtin_schema()
    assert any(ref.detail.value_labels for ref in a.details())
    assert hash(a) == hash(b) and {a: 1}[b] == 1
