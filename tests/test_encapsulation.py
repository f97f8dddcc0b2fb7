"""No module reaches into another's private attributes (the job queue ran SQL on the store's private
connection, the jobs API read the Memory's `_jobs`): what one module needs of another is part of its contract, so a
change inside one cannot silently break the other. These tests read every attribute access in src/boundmem."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "src" / "boundmem"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _own_names(tree: ast.AST) -> set[str]:
    """Private names the module itself defines (methods, class attributes, attributes set on self)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if _private(n)}


# documented public APIs of the standard library whose names start with "_"
STDLIB = {"os._exit"}


def foreign_private_reads(source: str) -> list[str]:
    tree = ast.parse(source)
    own = _own_names(tree)
    return sorted({f"{ast.unparse(node.value)}.{node.attr}" for node in ast.walk(tree)
                   if isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own
                   and ast.unparse(node.value) not in ("self", "cls")} - STDLIB)


def test_no_module_reads_another_modules_private_attributes():
    bad = {str(p.relative_to(PKG)): found for p in sorted(PKG.rglob("*.py"))
           if (found := foreign_private_reads(p.read_text(encoding="utf-8")))}
    assert not bad, bad


def test_the_finder_finds_a_foreign_private_read():
    assert foreign_private_reads("def f(store):\n    return store._use()\n") == ["store._use"]
    assert foreign_private_reads("class A:\n    def _x(self):\n        return A._x\n") == []


def test_the_job_queue_uses_no_connection_of_the_store():
    source = (PKG / "jobs.py").read_text(encoding="utf-8")
    attrs = {node.attr for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Attribute)}
    reach = {"con", "execute", "_use", "_conn", "_write"}
    assert not attrs & reach, attrs & reach
    api = (PKG / "service" / "jobs_api.py").read_text(encoding="utf-8")
    assert not {n.attr for n in ast.walk(ast.parse(api)) if isinstance(n, ast.Attribute)} & {"_mem", "_jobs"}
