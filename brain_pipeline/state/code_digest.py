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

Cached per process: the source is read once, as the code that runs was.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from collections.abc import Iterator
from pathlib import Path

from brain_pipeline.utils.digest import sha256_hex, value_digest

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
    _digest.cache_clear()
    _parse.cache_clear()


@functools.cache
def _digest(modules: tuple[str, ...], package: str, root: Path | None) -> str:
    files = module_closure(modules, package=package, root=root)
    return value_digest({name: _tree_digest(path) for name, path in files.items()})


def module_closure(
    modules: tuple[str, ...] | list[str], *, package: str = PACKAGE, root: Path | None = None
) -> dict[str, Path]:
    """Every module of `package` that importing `modules` runs -> its source file."""
    folder = root if root is not None else _package_folder(package)
    found: dict[str, Path] = {}
    todo = list(modules)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        path = _module_file(folder, package, name)
        if path is None:
            raise ValueError(f"{name} is not a module of {package} (under {folder})")
        found[name] = path
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        todo.extend(_imported(path, name, package, folder))
    return dict(sorted(found.items()))


def _package_folder(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"{package} is not an importable package")
    return Path(next(iter(spec.submodule_search_locations)))


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


def _imported(path: Path, name: str, package: str, folder: Path) -> list[str]:
    """The package's modules `path` (module `name`) imports at run time."""
    tree = _parse(path)
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: list[str] = []
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            out.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = here[: len(here) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            out.append(base)
            # `from pkg import mod` imports a module; `from mod import name`, a name.
            out.extend(
                f"{base}.{alias.name}"
                for alias in node.names
                if _module_file(folder, package, f"{base}.{alias.name}") is not None
            )
    return [m for m in out if _module_file(folder, package, m) is not None]


@functools.cache
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_bytes(), filename=str(path))


def _tree_digest(path: Path) -> str:
    return sha256_hex(ast.dump(_parse(path), include_attributes=False).encode("utf-8"))
