"""The tests mirror the packages: `brain_pipeline/<package>/<module>.py` is tested by
`brain_pipeline_tests/<package>/test_<module>.py`.

A product module without a test module of its name must be on `NOT_MIRRORED` with the
reason and the test file that exercises it now. The list is a debt to pay down, not a
place to park new code: a new module comes with its test module.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "brain_pipeline"
TESTS = REPO / "brain_pipeline_tests"

#: module (relative to brain_pipeline/) -> why it has no test module of its own, and where
#: it is exercised instead.
NOT_MIRRORED: dict[str, str] = {
    # Dagster wiring: exercised by materialising the real Definitions.
    "definitions.py": "the code location's entry point: defs/test_definitions.py loads it",
    "defs/publish.py": "wiring of steps.publish: defs/test_materialize.py",
    "lib/code_location.py": "loading the config once per location: defs/test_definitions.py",
    "lib/runner.py": "in-process materialisation: defs/test_materialize.py, defs/conftest.py",
    # Thin CLI commands: run end to end through `main()`.
    "cli/materialize.py": "`materialize`: locks/test_materialize_concurrency.py, defs tests",
    # Ledger areas, exercised with two workers sharing a PostgreSQL ledger and S3 blobs.
    "embedding/packs.py": "vector packs: embedding/test_workers.py, embedding/test_builder.py",
    "evaluation/judgements.py": "shared verdicts and baselines: state/test_shared_judgements.py",
}


def product_modules() -> list[str]:
    return sorted(
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.name not in ("__init__.py", "__main__.py")
    )


def mirror_of(module: str) -> Path:
    """`corpus/store.py` -> brain_pipeline_tests/corpus/test_store.py."""
    relative = Path(module)
    return TESTS / relative.parent / f"test_{relative.name}"


def test_every_product_module_has_a_test_module_or_a_stated_reason() -> None:
    missing = [m for m in product_modules() if not mirror_of(m).is_file()]
    assert [m for m in missing if m not in NOT_MIRRORED] == []


def test_the_list_names_only_modules_that_still_need_it() -> None:
    """Once a module has its test module (or is gone), its entry must go."""
    modules = set(product_modules())
    stale = [m for m in NOT_MIRRORED if m not in modules or mirror_of(m).is_file()]
    assert stale == []


def test_every_reason_names_where_the_module_is_exercised_or_why_not() -> None:
    for module, reason in NOT_MIRRORED.items():
        assert ".py" in reason, module


def test_the_test_files_a_reason_names_exist() -> None:
    """A reason pointing at a renamed or deleted test file is no longer true."""
    named = {
        (module, word.strip(",;")) for module, reason in NOT_MIRRORED.items()
        for word in reason.split() if word.strip(",;").endswith(".py") and "/" in word
    }  # fmt: skip
    assert named  # the pattern still matches how reasons are written
    assert [(m, path) for m, path in sorted(named) if not (TESTS / path).is_file()] == []


def test_the_mirror_rule() -> None:
    assert mirror_of("corpus/store.py") == TESTS / "corpus" / "test_store.py"
    assert mirror_of("config.py") == TESTS / "test_config.py"
    assert "corpus/store.py" in product_modules()
    assert not any(m.endswith("__init__.py") for m in product_modules())
