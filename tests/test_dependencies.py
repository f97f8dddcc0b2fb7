"""One list of dependencies (requirements.txt made openai, fastapi, uvicorn and httpx required where
pyproject made them extras): pyproject.toml is the source, the requirements files only group its extras and pin,
CI installs from them, and `requires-python` admits no interpreter the code cannot run on."""
from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECTS = {".": ROOT / "pyproject.toml", "./benchmarks": ROOT / "benchmarks" / "pyproject.toml"}


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _project(path: Path) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8"))["project"]


def _declared() -> set[str]:
    names = set()
    for path in PROJECTS.values():
        project = _project(path)
        names |= {_name(r) for r in project.get("dependencies", [])}
        names |= {_name(r) for reqs in project.get("optional-dependencies", {}).values() for r in reqs}
    return names


def _lines(name: str) -> list[str]:
    return [ln.split(" #")[0].strip() for ln in (ROOT / name).read_text(encoding="utf-8").splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")]


def test_requirements_files_only_group_the_projects_extras_or_pin():
    declared = _declared()
    for name in ("requirements.txt", "requirements-dev.txt"):
        for line in _lines(name):
            editable = re.fullmatch(r"-e (\.|\./benchmarks)(?:\[([\w,-]+)\])?", line)
            if editable:
                extras = _project(PROJECTS[editable.group(1)]).get("optional-dependencies", {})
                unknown = [e for e in (editable.group(2) or "").split(",") if e and e not in extras]
                assert not unknown, f"{name}: {line!r} names extras {unknown} that {editable.group(1)} lacks"
            elif line.startswith("-r "):
                assert (ROOT / line[3:].strip()).exists(), f"{name}: {line!r}"
            else:
                assert "==" in line, f"{name}: {line!r} is a requirement of its own; list it in pyproject.toml"
                assert _name(line) in declared, f"{name}: {line!r} pins a package no pyproject declares"


def test_the_default_install_is_the_package_with_the_server_and_llm_extras():
    assert _lines("requirements.txt") == ["-e .[llm,server]"]


def test_ci_installs_from_the_projects_files():
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    installs = [ln.strip() for ln in run.splitlines() if re.match(r"\s*pip install", ln)]
    assert installs == ["pip install -q -r requirements-dev.txt"], installs
    dev = _lines("requirements-dev.txt")
    assert any(ln.startswith("-e .[") for ln in dev) and any(ln.startswith("-e ./benchmarks") for ln in dev)


def test_the_readme_quick_start_installs_what_ci_installs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = readme[readme.index("## Quick start"):readme.index("## Using it")]
    assert "pip install -r requirements.txt && boundmem demo" in quick
    assert "pip install -q -r requirements-dev.txt && python -m pytest" in quick


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_requires_python_is_true():
    """tomllib (service/auth.py) is in the standard library from 3.11 on: a lower bound below it would install
    on an interpreter that cannot run the service."""
    for path in PROJECTS.values():
        spec = _project(path)["requires-python"]
        low = tuple(int(x) for x in re.fullmatch(r">=\s*(\d+)\.(\d+)", spec).groups())
        assert sys.version_info[:2] >= low, f"{path}: the tests run on {sys.version_info[:2]}, below {spec}"
        used = set().union(*(_imports(p) for p in (ROOT / "src" / "boundmem").rglob("*.py")))
        if "tomllib" in used:
            assert low >= (3, 11), f"{path}: requires-python {spec}, but the package imports tomllib (3.11)"
