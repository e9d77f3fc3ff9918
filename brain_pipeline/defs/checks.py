"""The blocking `retrieval_eval` check: nothing is published unless retrieval still works."""

import dagster as dg

from brain_pipeline.defs.common import embeddings_path, file_sha256, store_path, to_metadata
from brain_pipeline.defs.embed import embeddings
from brain_pipeline.defs.resources import BrainSettings
from brain_pipeline.services import evaluate_build

CHECK_NAME = "retrieval_eval"


@dg.asset_check(
    asset=embeddings,
    name=CHECK_NAME,
    blocking=True,
    description=(
        "Runs the labelled fixture through the legacy baseline, BM25 and hybrid retrieval "
        "on the built store and vectors. Fails (ERROR, blocking) when a threshold from "
        "corpus_config.yaml is missed, when the fixture names chunks the store no longer "
        "has, or when the store is empty — and then nothing downstream is published."
    ),
)
def retrieval_eval(
    context: dg.AssetCheckExecutionContext, settings: BrainSettings
) -> dg.AssetCheckResult:
    cfg = settings.load()
    outcome = evaluate_build(cfg)
    for failure in outcome.failures:
        context.log.error(f"retrieval_eval: {failure}")
    metadata: dict[str, object] = dict(outcome.flat_metrics)
    metadata["store_sha256"] = file_sha256(store_path(cfg.build_dir))
    metadata["embeddings_sha256"] = file_sha256(embeddings_path(cfg.build_dir))
    metadata["fixture"] = str(cfg.evaluation.fixture)
    metadata["failures"] = "\n".join(outcome.failures) or "none"
    metadata["stale_ids"] = ", ".join(outcome.stale_ids) or "none"
    result_metadata = to_metadata(metadata)
    result_metadata["evaluation"] = dg.MetadataValue.md(outcome.markdown)
    return dg.AssetCheckResult(
        passed=not outcome.failures,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata=result_metadata,
        description="passed" if not outcome.failures else "; ".join(outcome.failures)[:500],
    )
