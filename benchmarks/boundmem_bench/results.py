"""The results file every `boundmem bench` command writes beside its report: `<out>/<name>.json`.

It is what the docs' benchmark pages and README's figures table are rendered from (`boundmem bench render`), so a
published figure always comes out of a bench run, never out of someone's editor. One file holds the run's
provenance (date, commit, machine, load), the bench's own report (Markdown, as the bench wrote it), a few headline
figures with their format, and an optional machine-readable summary. A bench adds one call:

    write_results("recall", out, report_md, [Figure("held-out hit@1", 0.91)], machine=machine_at_start)

Publishing a run is copying its file into `benchmarks/results/` and running `boundmem bench render`.
"""
from __future__ import annotations

import json
import shlex
import sys
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

from boundmem.errors import InputError

from .report import code_version, load_average, machine_info, to_jsonable

FORMAT_VERSION = 1
Value = Union[int, float, str, None]


class ResultsFileError(InputError):
    """A results file (or a figure given to `write_results`) is not what the renderer can read; names the file and
    what is wrong, and nothing is written."""


@dataclass(frozen=True)
class Figure:
    """One headline figure: README's table and the page's summary show it as `label: value`.

    `format` is how the value reads: "" (floats to three decimals, the rest as is), "pct" (a share shown as a
    percentage) or a Python format spec such as ".1f" or ",.0f"; `unit` follows the value ("ms", "x"). A figure
    with `readme=False` shows on the bench's page only, so README's table stays a few lines per bench."""

    label: str
    value: Value
    format: str = ""
    unit: str = ""
    readme: bool = True

    def __post_init__(self) -> None:
        if not self.label.strip():
            raise ResultsFileError("a headline figure needs a label")
        if self.value is not None and not isinstance(self.value, (int, float, str)):
            raise ResultsFileError(f"figure {self.label!r}: value {self.value!r} is not a number, a string or None")
        if self.format not in ("", "pct"):
            try:
                format(1.5, self.format)
            except ValueError:
                raise ResultsFileError(f"figure {self.label!r}: {self.format!r} is not a format spec") from None

    def text(self) -> str:
        """The value as the docs show it; a missing value is a dash, never a zero."""
        v = self.value
        if v is None or (isinstance(v, float) and v != v):
            return "–"
        if isinstance(v, bool) or isinstance(v, str):
            return str(v)
        if self.format == "pct":
            s = f"{100 * v:.1f} %"
        elif self.format:
            s = format(v, self.format)
        else:
            s = f"{v:.3f}" if isinstance(v, float) else str(v)
        return s + (self.unit if self.unit in ("", "x") else f" {self.unit}")


def _command() -> Optional[str]:
    """The command line, when the process is the `boundmem` CLI (not a test runner calling a bench in-process)."""
    prog = Path(sys.argv[0]) if sys.argv else Path()
    if "boundmem" not in (prog.name, prog.parent.name):   # the console script, or `python -m boundmem`
        return None
    return shlex.join(["boundmem", *sys.argv[1:]])


def run_info(machine: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """Date, commit, machine and load of a run; `machine` is `report.machine_info()` taken when the run started
    (its load average is the load before the run, its commit the code that ran), else the machine now."""
    m = dict(machine) if machine is not None else machine_info()
    end = load_average()
    return {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), **(m.get("code") or code_version()),
            "machine": {k: m.get(k) for k in ("cpu", "cores", "usable_cores", "python", "platform")},
            "load": {"start": list(m["load_average_start"]) if m.get("load_average_start") else None,
                     "end": list(end) if end else None},
            "command": _command()}


def write_results(name: str, out: Union[str, Path], report: str, headline: Sequence[Figure] = (), *,
                  summary: Optional[Mapping[str, Any]] = None, machine: Optional[Mapping[str, Any]] = None) -> Path:
    """Write `<out>/<name>.json`: this run's provenance, `report` (the bench's Markdown), `headline` figures and an
    optional JSON-able `summary`. Returns the path. `name` is the bench command's name (the page it renders to)."""
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise ResultsFileError(f"results name {name!r}: use the bench command's name (letters, digits, - or _)")
    figures = list(headline)
    for f in figures:
        if not isinstance(f, Figure):
            raise ResultsFileError(f"{name}: headline entry {f!r} is not a Figure")
    doc = {"format": FORMAT_VERSION, "bench": name, "run": run_info(machine), "headline": [asdict(f) for f in figures],
           "summary": to_jsonable(dict(summary or {})), "report": report}
    path = Path(out) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


@dataclass(frozen=True)
class Results:
    """A results file as the renderer reads it."""

    bench: str
    run: dict[str, Any]
    headline: tuple[Figure, ...]
    summary: dict[str, Any]
    report: str
    path: Path


def read_results(path: Union[str, Path]) -> Results:
    """Load and check one results file; anything the renderer cannot use is a `ResultsFileError` naming the file."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise ResultsFileError(f"{p}: cannot read it ({e.strerror or e})") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ResultsFileError(f"{p}: not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise ResultsFileError(f"{p}: a results file is a JSON object, this is a {type(doc).__name__}")
    if doc.get("format") != FORMAT_VERSION:
        raise ResultsFileError(f"{p}: format {doc.get('format')!r}, this renderer reads format {FORMAT_VERSION}")
    for key, kind in (("bench", str), ("run", dict), ("headline", list), ("report", str)):
        if not isinstance(doc.get(key), kind):
            raise ResultsFileError(f"{p}: '{key}' is missing or not a {kind.__name__}")
    if doc["bench"] != p.stem:
        raise ResultsFileError(f"{p}: holds bench {doc['bench']!r}; the file must be named {doc['bench']}.json")
    figures = []
    for i, f in enumerate(doc["headline"]):
        try:
            figures.append(Figure(**f))
        except TypeError as e:
            raise ResultsFileError(f"{p}: headline[{i}]: {e}") from None
        except ResultsFileError as e:
            raise ResultsFileError(f"{p}: headline[{i}]: {e}") from None
    return Results(bench=doc["bench"], run=doc["run"], headline=tuple(figures), summary=doc.get("summary") or {},
                   report=doc["report"], path=p)
