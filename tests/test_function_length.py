"""No function over 60 lines in the package (the proxy's app factory was 156 lines, the MCP server's 68):
a function a reader cannot hold at once hides which of its steps a change touches. Benchmarks (outside the package)
are not counted. A nested function counts inside its parent too: a factory of closures is one function."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "src" / "boundmem"
MAX_LINES = 60


def long_functions(source: str, limit: int = MAX_LINES) -> list[tuple[str, int]]:
    return [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > limit]


def test_no_function_is_over_sixty_lines():
    found = {f"{p.relative_to(PKG)}:{name}": n for p in sorted(PKG.rglob("*.py"))
             for name, n in long_functions(p.read_text(encoding="utf-8"))}
    assert not found, found


def test_the_counter_counts_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(60))
    assert long_functions(f"def f():\n{body}\n") == [("f", 61)]
    assert long_functions(f"def f():\n{body[:-len('    x59 = 59') - 1]}\n") == []
