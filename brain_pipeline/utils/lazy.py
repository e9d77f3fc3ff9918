"""Package namespaces that import their modules on first use (PEP 562).

A package `__init__` that re-exports its modules' names eagerly makes every import of
any one module pay for all of them: the preflight of `materialize` reads the fixture
with `evaluation.fixture`, and an eager `evaluation/__init__` imported the evaluation
runner and numpy with it (~0.3 s of a refusal that should take well under a second).
With `lazy_exports` a name is imported when first read, then kept in the package.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, serving `exports` (name -> module)."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module hook's name
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # looked up once
        return value

    def __dir__() -> list[str]:  # noqa: N807
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
