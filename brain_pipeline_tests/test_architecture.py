"""The layering the README draws, enforced: contracts, no cycles, no private reach-ins.

`lint-imports` checks the package layers and that the pure core never imports Dagster
(contracts in pyproject.toml). The rest is what import-linter cannot say: no cycle
between any two modules (lazy imports included), no module importing another module's
`_private` names, no import of Dagster's private `dagster._…` modules, which change
without notice between releases, and no use of Dagster's non-public names outside the one
adapter, `lib/dagster_private.py` (docs/architecture.md).
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
ADAPTER = PACKAGE / "lib" / "dagster_private.py"
SCANNED = [PACKAGE, REPO / "benchmarks", REPO / "tools"]

#: Attributes of Dagster objects that are not public API (1.13.27): each has a public
#: replacement, or goes through `lib/dagster_private.py`, which pins it.
NON_PUBLIC_ATTRIBUTES = frozenset(
    {
        "event_type_value",  # DagsterEvent: the public `event_type`, `is_step_failure`, ...
        "event_specific_data",  # dagster_private.event_data
        "step_failure_data",
        "requires_cursor",  # dagster_private.NoCursor
        "dispose",  # DagsterInstance: use it as a context manager
        "child_evaluations",  # dagster_private.evaluation_tree
        "condition_snapshot",
        "serializable_evaluation",
        "asset_graph_view",  # dagster_private.automation_instance
        "run_storage",
        "event_log_storage",
        "schedule_storage",
        "get_records_for_run",
        "report_run_failed",
    }
)
#: Dagster's tags, which only the adapter reads or sets (ObserveResult/MaterializeResult
#: take a data version; dagster_private.observation where neither can be returned).
NON_PUBLIC_STRINGS = frozenset({"dagster/data_version", "dagster/asset_evaluation_id"})
NON_PUBLIC_NAMES = frozenset({"DATA_VERSION_TAG", "ASSET_EVALUATION_ID_TAG", "ComponentTree"})
#: `X.get()` of a step context (dagster_private.current_step_log).
NON_PUBLIC_GETTERS = frozenset({"OpExecutionContext", "AssetExecutionContext"})
#: Known uses left to another change: (file, name). Each must still be there (a stale
#: entry fails), so the list only shrinks. Empty: every use is public or in the adapter.
PENDING: frozenset[tuple[str, str]] = frozenset()


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


def non_public_dagster_uses(source: str) -> list[tuple[int, str]]:
    """(line, name) of every non-public Dagster name `source` uses: an attribute (also
    as a `getattr` string), a definition or import of one, a tag string, a step
    context's `.get()`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            if node.attr in NON_PUBLIC_ATTRIBUTES:
                found.append((node.lineno, node.attr))
            elif (
                node.attr == "get"
                and isinstance(node.value, ast.Attribute | ast.Name)
                and (getattr(node.value, "attr", None) or getattr(node.value, "id", None))
                in NON_PUBLIC_GETTERS
            ):
                owner = getattr(node.value, "attr", None) or getattr(node.value, "id", None)
                found.append((node.lineno, f"{owner}.get"))
            elif node.attr in NON_PUBLIC_NAMES:
                found.append((node.lineno, node.attr))
        elif isinstance(node, ast.FunctionDef) and node.name in NON_PUBLIC_ATTRIBUTES:
            found.append((node.lineno, node.name))
        elif isinstance(node, ast.Name) and node.id in NON_PUBLIC_NAMES:
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.alias) and (node.asname or node.name) in NON_PUBLIC_NAMES:
            found.append((node.lineno, node.asname or node.name))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            tag = node.value in NON_PUBLIC_STRINGS or any(
                node.value.startswith(tag + "/") for tag in NON_PUBLIC_STRINGS
            )
            if tag or node.value in NON_PUBLIC_ATTRIBUTES:  # getattr(event, "event_type_value")
                found.append((node.lineno, node.value))
    return sorted(set(found))


def _non_public_uses_outside_the_adapter() -> dict[tuple[str, str], list[int]]:
    uses: dict[tuple[str, str], list[int]] = {}
    for root in SCANNED:
        for path in sorted(root.rglob("*.py")):
            if path == ADAPTER:
                continue
            for line, name in non_public_dagster_uses(path.read_text(encoding="utf-8")):
                uses.setdefault((str(path.relative_to(REPO)), name), []).append(line)
    return uses


def test_dagsters_non_public_names_are_used_only_in_the_adapter() -> None:
    offenders = sorted(
        f"{path}:{','.join(map(str, lines))} {name}"
        for (path, name), lines in _non_public_uses_outside_the_adapter().items()
        if (path, name) not in PENDING
    )
    # Replace each with Dagster's public API, or move it into lib/dagster_private.py
    # with a pin in lib/test_dagster_private.py.
    assert offenders == []


def test_every_pending_exception_is_still_needed() -> None:
    uses = _non_public_uses_outside_the_adapter()
    assert sorted(PENDING - set(uses)) == [], "fixed: drop it from PENDING"


def test_the_scan_finds_each_kind_of_non_public_use() -> None:
    """The scan above must be able to fail."""
    source = """
import dagster as dg
from dagster._core.definitions.data_version import DATA_VERSION_TAG
kind = event.event_type_value
also = getattr(event, "step_failure_data", None)
data = event.event_specific_data
error = event.step_failure_data.error
instance.dispose()
context = dg.OpExecutionContext.get()
tags = {"dagster/data_version": "x"}
raw = tags.get("dagster/asset_evaluation_id")
class C(dg.AutomationCondition):
    @property
    def requires_cursor(self): return False
"""
    names = {name for _, name in non_public_dagster_uses(source)}
    assert names == {
        "DATA_VERSION_TAG",
        "event_type_value",
        "event_specific_data",
        "step_failure_data",
        "dispose",
        "OpExecutionContext.get",
        "dagster/data_version",
        "dagster/asset_evaluation_id",
        "requires_cursor",
    }
    # Public look-alikes are not flagged.
    assert non_public_dagster_uses("x = event.event_type\ny = dg.DagsterInstance.get()\n") == []


#: The format numbers that stay numbers: they describe bytes another program (the
#: Node.js agent, an older or newer pipeline sharing the publish root) reads in the
#: publish root, the contract of the store-compatibility reference, not the code that
#: wrote them. Every other version keys a cache or a verdict on the code: a digest of the
#: code (`state.code_digest`), or a check of the shape itself, never bumped by hand.
AGENT_CONTRACT_FORMATS = {
    "publishing/manifest.py": {"MANIFEST_FORMAT"},  # manifest.json beside the artifacts
    "publishing/commit.py": {"INTENT_FORMAT"},  # .brain-publish/intent.json, its recovery
}
_VERSION_NAME = re.compile(r"_?([A-Z0-9]+_)*(VERSION|FORMAT|SCHEMA)")


def hand_kept_versions(source: str) -> list[str]:
    """Module-level names like `*_VERSION`, `*_FORMAT` or `SCHEMA` given a literal number
    or a one-word string (`"3"`, `"store-1"`, `f"v{N}.2"`); DDL text is not a version."""

    def literal(value: ast.expr) -> bool:
        if isinstance(value, ast.JoinedStr):
            return True
        if not isinstance(value, ast.Constant) or isinstance(value.value, bool):
            return False
        text = value.value
        return isinstance(text, int) or (isinstance(text, str) and not text.split()[1:])

    found: list[str] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        found.extend(n for n in names if _VERSION_NAME.fullmatch(n) and literal(value))
    return found


def test_no_version_number_is_kept_by_hand() -> None:
    """A number bumped by hand is one forgotten bump away from serving a stale cache."""
    found = {
        path.relative_to(PACKAGE).as_posix(): set(hand_kept_versions(path.read_text("utf-8")))
        for path in sorted(PACKAGE.rglob("*.py"))
    }
    assert {module: names for module, names in found.items() if names} == AGENT_CONTRACT_FORMATS


def test_the_version_scan_finds_each_kind_of_hand_kept_number() -> None:
    """The check above must be able to fail."""
    source = (
        'CHUNKING_VERSION = "3"\nSTORE_INDEX_VERSION = 2\nSCHEMA = 2\n_FORMAT: int = 1\n'
        'INDEX_LAYOUT_VERSION = f"v{SCHEMA}.2"\nSTORE_CODE_VERSION = "store-1"\n'
        '_SCHEMA = """\nCREATE TABLE t (x);\n"""\nDATA_VERSION_TAG = "dagster/data_version"\n'
        'REASON_CONVERSION = "no"\nCODE_VERSION = code_version("x")\nFLAG_FORMAT = True\n'
    )
    assert hand_kept_versions(source) == [
        "CHUNKING_VERSION", "STORE_INDEX_VERSION", "SCHEMA", "_FORMAT",
        "INDEX_LAYOUT_VERSION", "STORE_CODE_VERSION",
    ]
