"""The package layout is the pipeline: schema -> embed -> extract/maintain -> store -> retrieve -> memory ->
service/cli (caim beside memory); the benchmarks live outside the package (benchmarks/boundmem_bench). These tests read every import in src/boundmem (also the ones inside
functions, which are cycles all the same when they run) and fail on a cycle or an arrow against the pipeline."""
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
    "extract": 3, "maintain": 3,
    "store": 4,
    "retrieve": 5,
    "memory": 6, "async_memory": 6, "jobs": 6, "caim": 6, "episodes": 6,
    "api_models": 7, "client": 7, "service": 7, "proxy": 7, "demo": 7, "<root>": 7,
    "cli": 8,  # the command line: only it parses options, and nothing below imports it
}



def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_module(name: str) -> bool:
    p = SRC / name.replace(".", "/")
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def _in_type_checking(node: ast.AST, parents: dict) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for path in sorted(PKG.rglob("*.py")):
        mod = _module_name(path)
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        graph[mod]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if _in_type_checking(node, parents):
                    continue
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if not target.startswith("boundmem"):
                    continue
                sub = [f"{target}.{a.name}" for a in node.names if _is_module(f"{target}.{a.name}")]
                # "from pkg import submodule" depends on the submodule; "from pkg import name" on pkg
                graph[mod].update(sub if sub and len(sub) == len(node.names) else [target, *sub])
            elif isinstance(node, ast.Import) and not _in_type_checking(node, parents):
                graph[mod].update(a.name for a in node.names if a.name.startswith("boundmem"))
    return graph


def rank(mod: str) -> int:
    parts = mod.split(".")
    return RANKS.get(parts[1] if len(parts) > 1 else "<root>", -1)


def test_every_module_has_a_place_in_the_pipeline():
    unplaced = sorted(m for m in import_graph() if rank(m) < 0)
    assert not unplaced, f"modules with no rank in RANKS: {unplaced}"


def test_no_import_against_the_pipeline():
    bad = sorted(f"{a} -> {b}" for a, bs in import_graph().items() for b in bs
                 if b != "boundmem" and rank(b) > rank(a))
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
    graph = {a: {b for b in bs if b != "boundmem" and not a.startswith(b + ".")} for a, bs in import_graph().items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_readme_layout_table_names_every_package():
    readme = (SRC.parent / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("The package layout is the pipeline"):readme.index("Guarantees, each covered")]
    parts = sorted([f"{p.name}/" for p in PKG.iterdir() if (p / "__init__.py").exists()]
                   + [p.name for p in PKG.glob("*.py") if p.name != "__init__.py"])
    missing = [p for p in parts if f"`{p}`" not in table]
    assert not missing, f"README's layout table does not name {missing}"


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
                                  "boundmem.extract.head_training"])
def test_moved_modules_are_gone(name):
    assert not _is_module(name)
