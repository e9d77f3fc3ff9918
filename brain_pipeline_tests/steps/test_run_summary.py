"""The run summary's lines, decided as plain values (lib.runner prints them for a run)."""

from __future__ import annotations

from dataclasses import dataclass

from brain_pipeline.steps.run_summary import blocked_line, check_line, failed_line, ok_line


@dataclass
class Wrapped:
    """A metadata value the way Dagster hands it over (the figure in `.value`)."""

    value: float


FIGURES = {"bm25.ndcg_at_10": 0.61234, "hybrid.ndcg_at_10": 0.7}


def _check(passed: bool | None, severity: str, metadata: dict, lexical: bool = False) -> str:
    return check_line(
        "retrieval_eval",
        passed=passed,
        severity=severity,
        description="why",
        metadata=metadata,
        lexical=lexical,
    )


def test_a_check_line_says_passed_warn_or_failed_by_severity() -> None:
    assert _check(True, "ERROR", {}) == "  check    retrieval_eval: passed"
    assert _check(False, "WARN", {}) == "  check    retrieval_eval: WARN why"
    assert _check(False, "ERROR", {}) == "  check    retrieval_eval: FAILED why"


def test_the_figures_are_bm25s_alone_and_named_so_without_vectors() -> None:
    assert _check(True, "ERROR", FIGURES).endswith("(bm25 nDCG@10 0.612, hybrid nDCG@10 0.700)")
    assert _check(True, "ERROR", FIGURES, lexical=True).endswith("(lexical BM25 nDCG@10 0.612)")


def test_the_known_item_figure_follows_and_stands_alone_without_labels() -> None:
    known = {"known_items.found_at_10": Wrapped(0.9375)}
    assert _check(True, "ERROR", known, lexical=True).endswith("(known items found@10 0.938)")
    assert _check(True, "ERROR", {**FIGURES, **known}, lexical=True).endswith(
        "(lexical BM25 nDCG@10 0.612, known items found@10 0.938)"
    )


def test_dagster_metadata_values_give_the_same_line_as_plain_ones() -> None:
    wrapped = {key: Wrapped(value) for key, value in FIGURES.items()}
    assert _check(False, "ERROR", wrapped) == _check(False, "ERROR", FIGURES)


def test_step_lines_name_the_outcome() -> None:
    assert ok_line("embeddings") == "  ok       embeddings"
    assert failed_line("embeddings", "E: x") == "  FAILED   embeddings: E: x"
    assert blocked_line("published_local") == (
        "  blocked  published_local: not run (an upstream step or blocking check failed)"
    )
