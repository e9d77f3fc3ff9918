"""A copy of the product package to edit, for the tests that show a cache key follows the
code: the key computed over the copy equals the real one until a module it depends on is
edited, then it changes (nothing to bump by hand)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from brain_pipeline.state import code_digest

PACKAGE = Path(code_digest.__file__).resolve().parents[1]


def key_after_edit(
    key: Callable[..., str],
    edited: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[str, str, str]:
    """(the key of the real package, of an unedited copy, of the copy once the module file
    `edited` (relative to the package, e.g. "corpus/chunking.py") gained a statement).

    `key` is a memoised key function taking `root=`; its memo and the digests' are
    cleared around the edit, and the cross-process memo is the test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    copy = tmp_path / "copy" / "brain_pipeline"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    clear = getattr(key, "cache_clear", lambda: None)
    clear()
    code_digest.clear_cache()
    real, before = key(), key(root=copy)
    target = copy / edited
    target.write_text(target.read_text(encoding="utf-8") + "\n_EDITED = True\n", encoding="utf-8")
    clear()
    code_digest.clear_cache()
    after = key(root=copy)
    clear()
    code_digest.clear_cache()
    return real, before, after
