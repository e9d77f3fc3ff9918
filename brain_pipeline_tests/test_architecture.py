"""The layering the README draws, enforced: contracts, no cycles, no private reach-ins.

`lint-imports` checks the package layers and that the pure core never imports Dagster
(contracts in pyproject.toml). The rest is what import-linter cannot say: no cycle
between any two modules (lazy imports included), no module importing another module's
`_private` names, and no import of Dagster's private `dagster._…` modules, which change
without notice between releases.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "brain_pipeline"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> Iterator[tuple[str, list[str], int]]:
    """(imported module, imported names, line) for every import in `path`, lazy ones too."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield target, [alias.name for alias in node.names], node.lineno


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target, names, _ in _imports(path):
            for candidate in [f"{target}.{n}" for n in names] or [target]:
                if candidate in modules:
                    graph[name].add(candidate)
                elif target in modules:
                    graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_import_linter_contracts_hold() -> None:
    program = shutil.which("lint-imports")
    assert program is not None, "lint-imports is a dev dependency: pip install -e '.[dev]'"
    result = subprocess.run(
        [program, "--no-cache"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert re.search(r"Contracts: [1-9]\d* kept, 0 broken", result.stdout), result.stdout[-2000:]


def test_no_module_takes_part_in_an_import_cycle() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The check above must be able to fail."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_another_modules_private_names() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line} {target}.{name}"
        for path in PACKAGE.rglob("*.py")
        for target, names, line in _imports(path)
        if target.startswith("brain_pipeline")
        for name in names
        if name.startswith("_") and not name.startswith("__")
    ]
    assert offenders == []


def test_nothing_imports_dagsters_private_modules() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line} {target}"
        for path in PACKAGE.rglob("*.py")
        for target, _, line in _imports(path)
        if target.startswith("dagster._") or target.startswith("dagster_shared._")
    ]
    assert offenders == []
