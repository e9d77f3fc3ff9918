"""Retrieval evaluation: the labelled fixture, the metrics, the legacy baseline, BEIR.

`run_evaluation(chunks, fixture, thresholds, ...) -> (report, failures)` is the single
entry point for the blocking `retrieval_eval` check and `brain-pipeline eval`.
"""

from brain_pipeline.evaluation.fixture import (
    Fixture,
    FixtureError,
    LabelledQuery,
    load_fixture,
    parse_fixture,
    unknown_areas,
)
from brain_pipeline.evaluation.runner import (
    RETRIEVERS,
    EvaluationProgress,
    EvaluationReport,
    QueryResult,
    RetrieverSummary,
    check_thresholds,
    evaluate,
    run_evaluation,
)

__all__ = [
    "RETRIEVERS",
    "EvaluationProgress",
    "EvaluationReport",
    "Fixture",
    "FixtureError",
    "LabelledQuery",
    "QueryResult",
    "RetrieverSummary",
    "check_thresholds",
    "evaluate",
    "load_fixture",
    "parse_fixture",
    "run_evaluation",
    "unknown_areas",
]
