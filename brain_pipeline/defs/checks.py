"""The blocking `retrieval_eval` check (its step: `steps.evaluate`).

It has an automation condition of its own (`lib.conditions.evaluation_condition`), so an
automation run that rebuilds the vectors evaluates them too, and its publish step finds
the verdict it requires.
"""

import dagster as dg

from brain_pipeline.config import BrainConfig
from brain_pipeline.defs.resources import BrainSettings
from brain_pipeline.lib.code_location import location_config
from brain_pipeline.lib.conditions import evaluation_condition
from brain_pipeline.lib.steps import EVAL_FIXTURE, check_result, start_step
from brain_pipeline.steps.contract import Build
from brain_pipeline.steps.evaluate import evaluate_for_check

CHECK_NAME = "retrieval_eval"


def build_retrieval_eval(cfg: BrainConfig) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset="embeddings",
        name=CHECK_NAME,
        blocking=True,
        additional_deps=[EVAL_FIXTURE],
        automation_condition=evaluation_condition(),
        description=(
            "Runs the labelled fixture through the legacy baseline, BM25 and hybrid retrieval "
            "on the built store and vectors. Fails (ERROR, blocking) when a threshold from "
            "corpus_config.yaml is missed, when the fixture names chunks the store no longer "
            "has, when the store is empty, or when a query the agent's retriever answered at "
            "the last publication is now a miss (evaluation.on_regression: block; warn makes "
            "it a WARN), or when the known-item check (passages found at the last "
            "publication, asked again with queries made from their own text; the gate "
            "when the fixture has no labels) sees an area lose its content or retrieval "
            "— and then nothing downstream is published. A "
            "result whose inputs (store, vectors, fixture, thresholds, code) are unchanged is "
            "reused and says so."
        ),
    )
    def retrieval_eval(
        context: dg.AssetCheckExecutionContext, settings: BrainSettings, embeddings: Build
    ) -> dg.AssetCheckResult:
        cfg = start_step(context.instance, settings)
        verdict = evaluate_for_check(cfg, embeddings, context.run.run_id)
        for warning in verdict.warnings:
            context.log.warning(f"retrieval_eval: {warning}")
        for error in verdict.errors:
            context.log.error(f"retrieval_eval: {error}")
        return check_result(verdict)

    return retrieval_eval


@dg.definitions
def evaluation_definitions() -> dg.Definitions:
    """The blocking retrieval evaluation that gates publishing."""
    return dg.Definitions(asset_checks=[build_retrieval_eval(location_config())])
