"""Shared output helpers for every `boundmem bench` command: Markdown, JSON, plots, progress, timing, machine.

Benchmarks write the same three kinds of artefact (report.md, results.json, PNGs), so the
formatting lives here once; nothing in this module knows about a particular benchmark.
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import platform
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Sequence, TypeVar

from boundmem.errors import ConfigError

T = TypeVar("T")


# --- numbers and Markdown -------------------------------------------------------------------
def fmt(x: Any, digits: int = 3, pct: bool = False) -> str:
    """A table cell: None/NaN -> '–', floats rounded (or as a percentage), everything else str()."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{100 * x:.1f} %" if pct else f"{x:.{digits}f}"
    return str(x)


def ratio(num: float, den: float) -> Optional[float]:
    """num/den, or None when the denominator is zero (rendered '–', never a fake 0)."""
    return num / den if den else None


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], digits: int = 3) -> str:
    def cell(v: Any) -> str:
        return (v if isinstance(v, str) else fmt(v, digits)).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


@dataclass
class Report:
    """A Markdown document built section by section."""

    title: str
    parts: list[str] = field(default_factory=list)

    def h2(self, text: str) -> "Report":
        self.parts.append(f"## {text}")
        return self

    def h3(self, text: str) -> "Report":
        self.parts.append(f"### {text}")
        return self

    def para(self, text: str) -> "Report":
        self.parts.append(text.strip())
        return self

    def bullets(self, items: Iterable[str]) -> "Report":
        self.parts.append("\n".join(f"- {i}" for i in items))
        return self

    def table(self, headers: Sequence[str], rows: Iterable[Sequence[Any]], digits: int = 3) -> "Report":
        self.parts.append(md_table(headers, rows, digits))
        return self

    def image(self, path: str, alt: str) -> "Report":
        self.parts.append(f"![{alt}]({path})")
        return self

    def render(self) -> str:
        return f"# {self.title}\n\n" + "\n\n".join(self.parts) + "\n"

    def write(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(self.render(), encoding="utf-8")
        return p


# --- JSON ------------------------------------------------------------------------------------
def to_jsonable(obj: Any) -> Any:
    """Pydantic models, numpy values, sets, paths and datetimes into plain JSON types."""
    if hasattr(obj, "model_dump"):
        return to_jsonable(obj.model_dump(mode="json"))
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted(to_jsonable(v) for v in obj)
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (datetime, date)):
        return obj.isoformat()
    if type(obj).__module__ == "numpy":
        return obj.tolist() if hasattr(obj, "tolist") else obj.item()
    if isinstance(obj, float) and math.isnan(obj):
        return None
    return obj


def write_json(path: str | Path, obj: Any) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(to_jsonable(obj), indent=1, ensure_ascii=False), encoding="utf-8")
    return p


# --- machine and time ------------------------------------------------------------------------
def _cpu_model() -> str:
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.lower().startswith("model name"):
                return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> Optional[tuple[float, float, float]]:
    try:
        return os.getloadavg()
    except (OSError, AttributeError):
        return None


def _git(*args: str) -> Optional[str]:
    try:
        r = subprocess.run(["git", *args], cwd=Path(__file__).resolve().parent, capture_output=True, text=True,
                           timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def code_version() -> dict[str, Any]:
    """The commit the bench code was loaded from and whether its code differed from it (src/ and the bench package;
    a results file being written is not a change to the code that measured it)."""
    commit = _git("rev-parse", "HEAD")
    top = _git("rev-parse", "--show-toplevel")
    dirty = None
    if commit and top:
        status = _git("-C", top, "status", "--porcelain", "--", "src", "benchmarks/boundmem_bench")
        dirty = bool(status) if status is not None else None
    return {"commit": commit, "dirty": dirty}


def machine_info() -> dict[str, Any]:
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {"cores": os.cpu_count(), "usable_cores": usable, "cpu": _cpu_model(), "platform": platform.platform(),
            "python": platform.python_version(), "load_average_start": load_average(), "code": code_version()}


class Stopwatch:
    """Wall and CPU seconds per named stage; CPU/wall < cores hints at contention on a shared machine."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self._cpu0 = time.process_time()
        self.stages: dict[str, dict[str, float]] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        w, c = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            s = self.stages.setdefault(name, {"wall_s": 0.0, "cpu_s": 0.0})
            s["wall_s"] += time.perf_counter() - w
            s["cpu_s"] += time.process_time() - c

    def total(self) -> dict[str, float]:
        return {"wall_s": time.perf_counter() - self.started, "cpu_s": time.process_time() - self._cpu0}

    def summary(self) -> dict[str, Any]:
        return {"stages": self.stages, "total": self.total(), "load_average_end": load_average()}


def timing_section(report: Report, watch: Stopwatch, machine: dict[str, Any]) -> None:
    """Wall time per stage plus the machine and how busy it was, so numbers from a shared box can be judged."""
    tot = watch.total()
    rows = [(k, v["wall_s"], v["cpu_s"]) for k, v in watch.stages.items()] + [("total", tot["wall_s"], tot["cpu_s"])]
    report.h2("Run time and machine")
    report.table(["stage", "wall s", "process CPU s"], rows, digits=1)
    la0, la1 = machine.get("load_average_start"), load_average()
    cores = machine.get("usable_cores") or machine.get("cores") or 1
    busy = ""
    if la0 and la1:
        busy = (f" Load average (1/5/15 min) before the run {la0[0]:.2f}/{la0[1]:.2f}/{la0[2]:.2f}, at the end "
                f"(including this run) {la1[0]:.2f}/{la1[1]:.2f}/{la1[2]:.2f}")
        if la0[0] >= cores:
            busy += ": the machine was busy when the run started (1-min load ≥ cores), so wall times may be inflated by contention."
        elif la1[0] > cores + 0.5:
            busy += f": other work competed for the {cores} cores during the run, so wall times are somewhat inflated."
        else:
            busy += ": little competing load."
    share = ratio(tot["cpu_s"], tot["wall_s"])
    report.para(f"Machine: {machine.get('cpu')}, {machine.get('cores')} cores ({cores} usable), Python "
                f"{machine.get('python')}, {machine.get('platform')}.{busy} This process used "
                f"{fmt(share, 2)} CPU-seconds per wall second.")


# --- progress --------------------------------------------------------------------------------
class _NoProgress:
    def add_task(self, *_a, **_k) -> int:
        return 0

    def advance(self, *_a, **_k) -> None:
        pass

    def update(self, *_a, **_k) -> None:
        pass


@contextmanager
def progress(enabled: bool = True) -> Iterator[Any]:
    """A rich Progress (bar, count, elapsed, ETA) or a silent stand-in with the same methods."""
    if not enabled:
        yield _NoProgress()
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), transient=False) as p:
        yield p


def track(prog: Any, items: Sequence[T], description: str) -> Iterator[T]:
    task = prog.add_task(description, total=len(items))
    for it in items:
        yield it
        prog.advance(task)


# --- plots -----------------------------------------------------------------------------------
class MissingExtraError(ConfigError):
    """An optional dependency of the command is not installed; names the extra that brings it."""


PLOTTING = ("carmem", "gvd")   # the bench commands whose reports need plots (perf writes its report without)


def require_plots() -> None:
    """Checked before a benchmark runs, so a missing matplotlib stops it at once, not after minutes of work."""
    if importlib.util.find_spec("matplotlib") is None:
        raise MissingExtraError("the benchmark plots need matplotlib: pip install 'boundmem-bench[plots]'")


def _plt():
    require_plots()
    import matplotlib

    matplotlib.use("Agg")  # files only; never a display
    import matplotlib.pyplot as plt

    return plt


def plot_confusion(matrix: Sequence[Sequence[float]], row_labels: Sequence[str], col_labels: Sequence[str],
                   path: str | Path, title: str, normalise_rows: bool = True, annotate: bool = True) -> Path:
    """Rows = truth, columns = prediction; colour is the row share, cells show raw counts."""
    import numpy as np

    plt = _plt()
    m = np.asarray(matrix, dtype=float)
    shown = m / np.maximum(m.sum(axis=1, keepdims=True), 1) if normalise_rows else m
    size = max(6.0, 0.28 * max(len(row_labels), len(col_labels)) + 3)
    fig, ax = plt.subplots(figsize=(size * 1.1, size))
    im = ax.imshow(shown, cmap="Blues", vmin=0, vmax=1 if normalise_rows else None, aspect="auto")
    ax.set_xticks(range(len(col_labels)), labels=list(col_labels), rotation=90, fontsize=7)
    ax.set_yticks(range(len(row_labels)), labels=list(row_labels), fontsize=7)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(title, fontsize=10)
    if annotate:
        fs = 7 if len(row_labels) <= 15 else 4
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                if m[i, j]:
                    ax.text(j, i, f"{int(m[i, j])}", ha="center", va="center", fontsize=fs,
                            color="white" if shown[i, j] > 0.5 else "black")
    fig.colorbar(im, ax=ax, fraction=0.03)
    return save_figure(fig, path)


def plot_lines(x: Sequence[float], series: dict[str, Sequence[Optional[float]]], path: str | Path, title: str,
               xlabel: str, ylabel: str, refs: Optional[dict[str, float]] = None, ylim: Optional[tuple[float, float]] = (0, 1)) -> Path:
    """One line per series; `refs` draws labelled horizontal reference lines (e.g. a paper's figure)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, ys in series.items():
        ax.plot(list(x), [float("nan") if y is None else y for y in ys], marker="o", label=name)
    for name, y in (refs or {}).items():
        ax.axhline(y, linestyle="--", linewidth=0.8, color="grey")
        ax.text(x[-1], y, f" {name}", va="bottom", ha="right", fontsize=7, color="grey")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if ylim:
        ax.set_ylim(*ylim)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def save_figure(fig, path: str | Path) -> Path:
    """Lay out, write (creating the folder) and close a matplotlib figure."""
    fig.tight_layout()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=110)
    _plt().close(fig)
    return p
