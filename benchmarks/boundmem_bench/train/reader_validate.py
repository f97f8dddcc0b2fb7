"""Check written reader data against WRITING.md: spans are exact substrings, categories and items exist in the schema.

Standalone (PyYAML only) so writers can run it before the project is installed:
    python benchmarks/boundmem_bench/train/reader_validate.py written/w01.jsonl [...]   (from reader_data/)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parents[1] / "reader_data"
SCHEMA_FILES = {
    "incar": HERE.parents[2] / "src/boundmem/schema/data/incar.yaml",
    "smarthome": HERE.parents[2] / "src/boundmem/schema/data/smarthome.yaml",
    **{p.stem: p for p in sorted((HERE / "schemas").glob("*.yaml"))},   # writers' own schemas: support, persona...
    "travel": HERE.parent / "challenge_data/travel.yaml",
    "smarthome-challenge": HERE.parent / "challenge_data/smarthome.yaml",
}
KINDS = {"lasting", "terse_answer", "negation", "real_names", "multi", "buried", "correction", "hedge",
         "other_people", "oneoff_lasting", "oneoff_command", "question", "chitchat", "out_of_schema", "non_english",
         "indifferent", "instruction", "carmem", "spc", "slurp"}
POLARITY = {"like", "dislike", "indifferent"}
EVIDENCE = {"stated", "observed", "none"}
HOLDER = {"self", "other"}


def schema_details(name: str) -> dict[str, dict]:
    """Detail name -> {"values": open|closed, "attributes": [...]} for one schema file."""
    data = yaml.safe_load(SCHEMA_FILES[name].read_text())
    out = {}
    for m in data["mains"]:
        for s in m["subs"]:
            for d in s["details"]:
                attrs = list(d.get("attributes") or [])
                kind = d.get("values") or ("closed" if attrs else "open")
                out[d["name"]] = {"values": kind, "attributes": attrs}
    return out


def locate(text: str, span: str, occurrence: int = 1) -> int:
    start = -1
    for _ in range(occurrence):
        start = text.find(span, start + 1)
        if start < 0:
            return -1
    return start


def check_line(row: dict, details: dict[str, dict[str, dict]]) -> list[str]:
    errs = []
    for key in ("id", "writer", "schema", "style", "kind", "text", "spans"):
        if key not in row:
            errs.append(f"missing {key}")
    if errs:
        return errs
    if row["schema"] not in details:
        return [f"unknown schema {row['schema']!r}"]
    cats = details[row["schema"]]
    if row["style"] not in ("written", "spoken"):
        errs.append(f"style {row['style']!r}")
    if row["kind"] not in KINDS:
        errs.append(f"kind {row['kind']!r}")
    for sp in row["spans"]:
        where = f"span {sp.get('text')!r}"
        if not sp.get("text") or locate(row["text"], sp["text"], int(sp.get("occurrence", 1))) < 0:
            errs.append(f"{where}: not an exact substring of the text")
        if sp.get("refers") and sp["refers"] not in row["text"] and sp["refers"] not in (row.get("context") or ""):
            errs.append(f"{where}: refers {sp['refers']!r} is in neither the text nor the context")
        errs += _labels(sp, cats, where)
    for imp in row.get("implied") or []:
        if imp.get("detail") not in cats:
            errs.append(f"implied detail {imp.get('detail')!r} not in schema")
        errs += _labels({**imp, "holder": imp.get("holder", "self")}, cats, "implied")
    return errs


def _labels(sp: dict, cats: dict[str, dict], where: str) -> list[str]:
    errs = []
    detail = sp.get("detail")
    if detail is not None and detail not in cats:
        errs.append(f"{where}: detail {detail!r} not in schema")
    if sp.get("polarity") not in POLARITY:
        errs.append(f"{where}: polarity {sp.get('polarity')!r}")
    if sp.get("evidence") not in EVIDENCE:
        errs.append(f"{where}: evidence {sp.get('evidence')!r}")
    if sp.get("holder") not in HOLDER:
        errs.append(f"{where}: holder {sp.get('holder')!r}")
    item = sp.get("item")
    if detail in cats and item is not None:
        if item not in cats[detail]["attributes"]:
            errs.append(f"{where}: item {item!r} is not a listed attribute of {detail!r}")
    return errs


def main(paths: list[str]) -> int:
    details = {name: schema_details(name) for name in SCHEMA_FILES}
    bad = total = 0
    ids: set[str] = set()
    for path in paths:
        for n, line in enumerate(Path(path).read_text().splitlines(), 1):
            if not line.strip():
                continue
            total += 1
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                print(f"{path}:{n}: not JSON: {e}")
                bad += 1
                continue
            errs = check_line(row, details)
            if row.get("id") in ids:
                errs.append(f"duplicate id {row.get('id')}")
            ids.add(row.get("id"))
            for e in errs:
                print(f"{path}:{n}: {row.get('id')}: {e}")
            bad += bool(errs)
    print(f"{total} lines, {bad} with errors")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
