"""Retrieval evaluation: the labelled fixture, the metrics, the legacy baseline, BEIR.

`run_evaluation(chunks, fixture, thresholds, ...) -> (report, failures)` is the single
entry point for the blocking `retrieval_eval` check and `brain-pipeline eval`.
"""

from typing import TYPE_CHECKING

from brain_pipeline.utils.lazy import lazy_exports

if TYPE_CHECKING:
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

# Imported on first use: importing one module of the package costs only that module.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Fixture": "brain_pipeline.evaluation.fixture",
        "FixtureError": "brain_pipeline.evaluation.fixture",
        "LabelledQuery": "brain_pipeline.evaluation.fixture",
        "load_fixture": "brain_pipeline.evaluation.fixture",
        "parse_fixture": "brain_pipeline.evaluation.fixture",
        "unknown_areas": "brain_pipeline.evaluation.fixture",
        "RETRIEVERS": "brain_pipeline.evaluation.runner",
        "EvaluationProgress": "brain_pipeline.evaluation.runner",
        "EvaluationReport": "brain_pipeline.evaluation.runner",
        "QueryResult": "brain_pipeline.evaluation.runner",
        "RetrieverSummary": "brain_pipeline.evaluation.runner",
        "check_thresholds": "brain_pipeline.evaluation.runner",
        "evaluate": "brain_pipeline.evaluation.runner",
        "run_evaluation": "brain_pipeline.evaluation.runner",
    },
)
