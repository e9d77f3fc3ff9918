"""The digest of the code that produced a result, computed from the code itself.

`code_digest("brain_pipeline.steps.embed")` digests that module's source and,
transitively, the source of every module of the package it imports (resolved from the
syntax tree, without importing anything; parent packages' `__init__` included, since
importing a module runs them). It replaces hand-bumped constants such as
`STORE_CODE_VERSION`: a forgotten bump can no longer serve a stale cache.

What counts as a change: the module's syntax tree (`ast.dump`), not its bytes. Code,
string literals and docstrings change the digest; comments, blank lines and layout do
not, so a comment fixed in `config.py` does not make every step look new (at the price
of a re-embedding, that matters). A Python upgrade that changes the tree's form changes
every digest once: the safe direction. Imports under `if TYPE_CHECKING:` do not count
(they run no code); imports inside functions do. Modules outside the package (numpy,
the standard library) are not digested: their versions belong in the settings digest
of the steps they shape.

Cached per process (each source file is read and each module name looked up once, as
the code that runs was), and across
processes in a small memo (`MEMO`: per source file, its stat signature -> its tree digest
and the imports it names), because every command asks for these digests and parsing and
dumping ~70 syntax trees cost about half a second each time. A file whose signature
changed is parsed again; a memo that cannot be read or written is only a slower run.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from brain_pipeline.utils.atomic import atomic_write_bytes
from brain_pipeline.utils.digest import sha256_hex, value_digest
from brain_pipeline.utils.file_signature import FileSignature

PACKAGE = "brain_pipeline"


def code_digest(*modules: str, package: str = PACKAGE, root: Path | None = None) -> str:
    """sha256 hex of `modules` and the package's modules they import, transitively.

    `root` is the package's folder (default: where `package` is imported from).
    """
    if not modules:
        raise ValueError("code_digest needs at least one module name")
    return _digest(tuple(sorted(set(modules))), package, root)


def clear_cache() -> None:
    """Forget the digests computed so far (for code that edits sources it digests)."""
    for cached in (_digest, _parse, _memo, _facts, _module_file):
        cached.cache_clear()


def memo_path() -> Path:
    """Where the cross-process memo lives: the user's cache folder (XDG_CACHE_HOME)."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base) / "brain-pipeline" / "code-digests.json"


@functools.cache
def _memo() -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(memo_path().read_bytes())
        if isinstance(data, dict):
            return data
    return {}


def _save_memo(entries: dict[str, Any]) -> None:
    """Add `entries`, dropping those of files that no longer exist (a removed checkout or
    temporary copy), so the memo holds about one entry per live source file."""
    memo = _memo()
    memo.update(entries)
    for gone in [path for path in memo if not os.path.exists(path)]:
        del memo[gone]
    with contextlib.suppress(OSError):
        memo_path().parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(memo_path(), json.dumps(memo, sort_keys=True).encode("utf-8"))


@functools.cache
def _facts(path: Path) -> tuple[str, list[str], dict[str, Any] | None]:
    """(tree digest, import candidates) of `path`, from the memo when its signature still
    matches; else parsed, with the memo entry to save (None when it came from the memo).

    Once per process: a command asks for several digests whose closures overlap, and the
    source that runs does not change under it (`clear_cache` for code that edits it)."""
    signature = FileSignature.of(path)
    known = _memo().get(str(path))
    if signature is not None and isinstance(known, dict) and known.get("stat") == (
        signature.as_list()
    ):
        return str(known["tree"]), [str(m) for m in known["imports"]], None
    tree, imports = _tree_digest(path), _candidates(path)
    entry = None
    if signature is not None:
        entry = {"stat": signature.as_list(), "tree": tree, "imports": imports}
    return tree, imports, entry


@functools.cache
def _digest(modules: tuple[str, ...], package: str, root: Path | None) -> str:
    trees = _walk(modules, package, root)
    return value_digest({name: tree for name, (_, tree) in trees.items()})


def module_closure(
    modules: tuple[str, ...] | list[str], *, package: str = PACKAGE, root: Path | None = None
) -> dict[str, Path]:
    """Every module of `package` that importing `modules` runs -> its source file."""
    return {name: path for name, (path, _) in _walk(tuple(modules), package, root).items()}


def _walk(
    modules: tuple[str, ...], package: str, root: Path | None
) -> dict[str, tuple[Path, str]]:
    """The closure of `modules`: module name -> (source file, tree digest), sorted; what
    was parsed anew goes into the memo."""
    folder = root if root is not None else _package_folder(package)
    found: dict[str, tuple[Path, str]] = {}
    fresh: dict[str, Any] = {}
    todo = list(modules)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        path = _module_file(folder, package, name)
        if path is None:
            raise ValueError(f"{name} is not a module of {package} (under {folder})")
        tree, candidates, entry = _facts(path)
        found[name] = (path, tree)
        if entry is not None and _memo().get(str(path)) is not entry:  # not saved yet
            fresh[str(path)] = entry
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        todo.extend(_resolve(candidates, name, path, package, folder))
    if fresh:
        _save_memo(fresh)
    return dict(sorted(found.items()))


def _package_folder(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"{package} is not an importable package")
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def _module_file(folder: Path, package: str, name: str) -> Path | None:
    if name != package and not name.startswith(package + "."):
        return None
    base = folder.joinpath(*name.split(".")[1:])
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under `node`, except the bodies of `if TYPE_CHECKING:`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield other
                yield from _runtime_nodes(other)
            continue
        yield child
        yield from _runtime_nodes(child)


def _candidates(path: Path) -> list[str]:
    """What `path` imports at run time, as written: `(level, module, [names])` folded into
    strings `"<level>:<module>:<name>"`, resolved against the package by `_resolve` (so
    the memo holds what the file says, not what the package looks like today)."""
    out: list[str] = []
    for node in _runtime_nodes(_parse(path)):
        if isinstance(node, ast.Import):
            out.extend(f"0:{alias.name}:" for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            out.append(f"{node.level}:{module}:")
            out.extend(f"{node.level}:{module}:{alias.name}" for alias in node.names)
    return out


def _resolve(
    candidates: list[str], name: str, path: Path, package: str, folder: Path
) -> list[str]:
    """The package's modules among `candidates` of module `name` (file `path`)."""
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: list[str] = []
    for candidate in candidates:
        level_text, module, alias = candidate.split(":", 2)
        level = int(level_text)
        if level:
            anchor = here[: len(here) - (level - 1)]
            base = ".".join([*anchor, *([module] if module else [])])
        else:
            base = module
        # `from pkg import mod` imports a module; `from mod import name`, a name.
        target = f"{base}.{alias}" if alias else base
        if _module_file(folder, package, target) is not None:
            out.append(target)
    return out


@functools.cache
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_bytes(), filename=str(path))


def _tree_digest(path: Path) -> str:
    return sha256_hex(ast.dump(_parse(path), include_attributes=False).encode("utf-8"))
