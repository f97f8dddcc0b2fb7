"""The package layout is the pipeline: schema -> embed -> extract/maintain -> store -> retrieve -> memory ->
service/cli (caim beside memory); the benchmarks live outside the package (benchmarks/boundmem_bench). These tests read
every import in src/boundmem (also the ones inside functions, which are cycles all the same when they run, the ones
under TYPE_CHECKING, and modules named for import_module) and fail on a cycle or an arrow against the pipeline."""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "boundmem"

# rank of each top-level module or package of boundmem; a module may import only ranks <= its own
RANKS = {
    "errors": 0, "config": 0, "registry": 0,
    "schema": 1, "models": 1, "conversation": 1, "messages": 1, "user_id": 1,
    "embed": 2, "llm": 2,
    "extract": 3, "maintain": 3, "consent": 3,
    "store": 4,
    "retrieve": 5,
    "memory": 6, "ingest": 6, "async_memory": 6, "jobs": 6, "caim": 6, "episodes": 6,
    "api_models": 7, "client": 7, "service": 7, "proxy": 7, "demo": 7, "<root>": 7,
    "cli": 8,  # the command line: only it parses options, and nothing below imports it
    "integrations": 9,  # the voice frameworks' hooks (Pipecat, LiveKit): they use the library, nothing imports them
}



def _module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_module(name: str, src: Path = SRC) -> bool:
    p = src / name.replace(".", "/")
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def _imports(tree: ast.AST, package: str, src: Path) -> set[str]:
    """Every boundmem module `tree` imports: top-level, inside functions, under `if TYPE_CHECKING:` (a cycle for the
    type checker and for whoever moves the import out of the guard), and by name (a string that names a module, as
    `import_module` and the CLI's lazy sub-apps take it)."""
    out: set[str] = set()
    top = package.split(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != top:
                continue
            sub = [f"{target}.{a.name}" for a in node.names if _is_module(f"{target}.{a.name}", src)]
            # "from pkg import submodule" depends on the submodule; "from pkg import name" on pkg
            out.update(sub if sub and len(sub) == len(node.names) else [target, *sub])
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == top)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(top + ".")
              and node.value.replace(".", "").replace("_", "").isalnum() and _is_module(node.value, src)):
            out.add(node.value)
    return out


def import_graph(pkg: Path = PKG) -> dict[str, set[str]]:
    src = pkg.parent
    graph: dict[str, set[str]] = defaultdict(set)
    for path in sorted(pkg.rglob("*.py")):
        mod = _module_name(path, src)
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        graph[mod].update(_imports(ast.parse(path.read_text(encoding="utf-8")), package, src))
    return graph


def rank(mod: str) -> int:
    parts = mod.split(".")
    return RANKS.get(parts[1] if len(parts) > 1 else "<root>", -1)


def test_every_module_has_a_place_in_the_pipeline():
    unplaced = sorted(m for m in import_graph() if rank(m) < 0)
    assert not unplaced, f"modules with no rank in RANKS: {unplaced}"


def against_the_pipeline(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} -> {b}" for a, bs in graph.items() for b in bs if b != "boundmem" and rank(b) > rank(a))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles; a module importing its own package (its __init__) is not one."""
    return _cycles({a: {b for b in bs if b != "boundmem" and not a.startswith(b + ".")} for a, bs in graph.items()})


def test_no_import_against_the_pipeline():
    bad = against_the_pipeline(import_graph())
    assert not bad, "imports against the pipeline:\n" + "\n".join(bad)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_graph_is_the_whole_package():
    """The counts above are over every module, the CLI's included, and over the imports that hide (TYPE_CHECKING,
    inside a function, by name)."""
    graph = import_graph()
    assert {"boundmem.cli.root", "boundmem.cli.options", "boundmem.cli.llm"} <= set(graph)
    assert "boundmem.extract.registry" in graph["boundmem.cli.options"]
    assert "boundmem.cli.serve" in graph["boundmem.cli.root"]   # mounted lazily, by module name


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "boundmem"
    for name, text in {"__init__.py": "", **files}.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text, encoding="utf-8")
    for d in [p for p in pkg.rglob("*") if p.is_dir()]:
        (d / "__init__.py").touch()
    return pkg


def test_a_planted_type_checking_cycle_fails(tmp_path):
    pkg = _plant(tmp_path, {
        "memory.py": "from .jobs import JobQueue\n",
        "jobs.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .memory import Memory\n",
        "store/sql.py": "def f():\n    from ..retrieve import base\n",   # against the pipeline, in a function
        "retrieve/base.py": "",
    })
    graph = import_graph(pkg)
    assert cycles(graph) == [["boundmem.jobs", "boundmem.memory"]]
    assert against_the_pipeline(graph) == ["boundmem.store.sql -> boundmem.retrieve.base"]


def test_a_planted_cli_arrow_fails(tmp_path):
    """A command line kept beside the stage it drives (the old llm/cli.py) imports up the pipeline: it is found,
    whether it imports the module or names it for import_module."""
    pkg = _plant(tmp_path, {
        "llm/cli.py": "from ..extract.llm import LLMExtractor\n",
        "embed/cli.py": "from importlib import import_module\nx = import_module('boundmem.maintain.llm')\n",
        "extract/llm.py": "", "maintain/llm.py": "", "cli/options.py": "from ..extract.llm import LLMExtractor\n",
    })
    assert against_the_pipeline(import_graph(pkg)) == ["boundmem.embed.cli -> boundmem.maintain.llm",
                                                       "boundmem.llm.cli -> boundmem.extract.llm"]


def test_only_the_cli_imports_typer():
    """A module that parses command lines is a CLI module, and those live in cli/ (rank 8, imported by nothing below):
    a typer import elsewhere is a CLI module hiding in a stage."""
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        if path.relative_to(PKG).parts[0] == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            bad += [f"{path.relative_to(SRC)} -> {n}" for n in names if n.split(".")[0] in ("typer", "click")]
    assert not bad, bad


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_docs_layout_table_names_every_package():
    readme = (SRC.parent / "docs" / "concepts" / "pipeline.md").read_text(encoding="utf-8")
    table = readme[readme.index("The package layout is the pipeline"):readme.index("## Embedding backends")]
    parts = sorted([f"{p.name}/" for p in PKG.iterdir() if (p / "__init__.py").exists()]
                   + [p.name for p in PKG.glob("*.py") if p.name != "__init__.py"])
    missing = [p for p in parts if f"`{p}`" not in table]
    assert not missing, f"the pipeline page's layout table does not name {missing}"


def test_the_runtime_never_imports_the_benchmarks():
    """`pip install boundmem` carries no benchmark: no module of the package may need one."""
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            bad += [f"{path.relative_to(SRC)} -> {n}" for n in names if n.split(".")[0] == "boundmem_bench"]
    assert not bad, bad


@pytest.mark.parametrize("name", ["boundmem.retrieve.embed", "boundmem.store.stress", "boundmem.factory", "boundmem.bench",
                                  "boundmem.cli_options", "boundmem.service.cli", "boundmem.proxy.cli", "boundmem.caim.cli",
                                  "boundmem.llm.cli", "boundmem.llm.local", "boundmem.maintain.local",
                                  "boundmem.extract.head_training", "boundmem.caim.baselines"])
def test_moved_modules_are_gone(name):
    assert not _is_module(name)
