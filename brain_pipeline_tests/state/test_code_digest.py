"""The code digest: from the source of a module and the package's modules it imports."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from brain_pipeline.state import code_digest as cd

MODULES = {
    "__init__.py": "",
    "step.py": (
        "from pkgx import helper\n"
        "from .sub.deep import rule\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from pkgx import typing_only\n"
        "def run():\n"
        "    from pkgx.lazy import later  # a lazy import runs too\n"
        "    return helper.f() + rule() + later()\n"
    ),
    "helper.py": "def f():\n    return 1\n",
    "lazy.py": "def later():\n    return 2\n",
    "typing_only.py": "X = 1\n",
    "unrelated.py": "def g():\n    return 3\n",
    "sub/__init__.py": "",
    "sub/deep.py": '"""Rules."""\n\ndef rule():\n    return 4\n',
}


@pytest.fixture(autouse=True)
def own_memo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test its own cross-process memo (never the user's cache folder)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cd.clear_cache()
    return cd.memo_path()


@pytest.fixture
def package(tmp_path: Path) -> Path:
    root = tmp_path / "pkgx"
    for name, text in MODULES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def digest(package: Path) -> Callable[[], str]:
    def compute() -> str:
        cd.clear_cache()
        return cd.code_digest("pkgx.step", package="pkgx", root=package)

    return compute


def test_the_closure_follows_every_runtime_import_of_the_package(package: Path) -> None:
    closure = cd.module_closure(["pkgx.step"], package="pkgx", root=package)
    assert sorted(closure) == [
        "pkgx", "pkgx.helper", "pkgx.lazy", "pkgx.step", "pkgx.sub", "pkgx.sub.deep",
    ]  # fmt: skip
    assert closure["pkgx.sub"] == package / "sub" / "__init__.py"


@pytest.mark.parametrize(
    ("module", "old", "new"),
    [
        ("helper.py", "return 1", "return 10"),  # a function body in an imported module
        ("sub/deep.py", "return 4", "return 4 + 0"),  # through a relative import
        ("lazy.py", "return 2", "return 20"),  # imported inside a function
        ("step.py", "return helper", "return  -helper"),
        ("sub/deep.py", '"""Rules."""', '"""Other rules."""'),  # a docstring is code
    ],
)
def test_a_change_of_code_changes_the_digest(
    package: Path, digest: Callable[[], str], module: str, old: str, new: str
) -> None:
    before = digest()
    path = package / module
    path.write_text(path.read_text().replace(old, new), encoding="utf-8")
    assert digest() != before


@pytest.mark.parametrize(
    ("module", "old", "new"),
    [
        ("helper.py", "return 1\n", "return 1  # one\n\n\n"),  # a comment, blank lines
        ("helper.py", "def f():", "def f( ):"),  # layout
        ("unrelated.py", "return 3", "return 30"),  # not imported
        ("typing_only.py", "X = 1", "X = 2"),  # imported for type checking only
    ],
)
def test_comments_layout_and_modules_not_run_leave_it_alone(
    package: Path, digest: Callable[[], str], module: str, old: str, new: str
) -> None:
    before = digest()
    path = package / module
    path.write_text(path.read_text().replace(old, new), encoding="utf-8")
    assert digest() == before


def test_the_digest_is_cached_per_process(package: Path, digest: Callable[[], str]) -> None:
    before = digest()
    (package / "helper.py").write_text("def f():\n    return 99\n", encoding="utf-8")
    assert cd.code_digest("pkgx.step", package="pkgx", root=package) == before  # as it runs
    assert digest() != before  # once the cache is cleared


def test_the_real_package_digests_the_ledger_with_what_it_imports() -> None:
    closure = cd.module_closure(["brain_pipeline.state.ledger"])
    assert {
        "brain_pipeline", "brain_pipeline.state", "brain_pipeline.state.ledger",
        "brain_pipeline.state.lock", "brain_pipeline.utils", "brain_pipeline.utils.digest",
    } == set(closure)  # fmt: skip
    value = cd.code_digest("brain_pipeline.state.ledger")
    assert len(value) == 64 and value == cd.code_digest("brain_pipeline.state.ledger")
    assert value != cd.code_digest("brain_pipeline.state.blobs")


def test_an_unknown_module_is_one_line() -> None:
    with pytest.raises(ValueError, match="brain_pipeline.nope is not a module of brain_pipeline"):
        cd.code_digest("brain_pipeline.nope")
    with pytest.raises(ValueError, match="at least one"):
        cd.code_digest()


def test_another_process_reuses_the_memo_until_a_file_changes(
    package: Path, digest: Callable[[], str], own_memo: Path
) -> None:
    first = digest()
    assert str(package / "helper.py") in own_memo.read_text(encoding="utf-8")
    # A process that finds the memo takes the tree digests from it, parsing nothing: a
    # memo entry altered while its file's signature still matches is what it reads.
    import json

    memo = json.loads(own_memo.read_text(encoding="utf-8"))
    memo[str(package / "helper.py")]["tree"] = "0" * 64
    own_memo.write_text(json.dumps(memo), encoding="utf-8")
    assert digest() != first
    # A changed file is parsed again (its signature no longer matches the memo's).
    helper = package / "helper.py"
    helper.write_text(helper.read_text(encoding="utf-8") + "\n# touched\n", encoding="utf-8")
    assert digest() == first  # a comment: the same tree as at first
    assert json.loads(own_memo.read_text(encoding="utf-8"))[str(helper)]["tree"] != "0" * 64


def test_the_memo_forgets_files_that_are_gone(
    package: Path, digest: Callable[[], str], own_memo: Path
) -> None:
    digest()
    (package / "lazy.py").unlink()
    (package / "step.py").write_text("def run():\n    return 1\n", encoding="utf-8")
    digest()
    assert str(package / "lazy.py") not in own_memo.read_text(encoding="utf-8")
