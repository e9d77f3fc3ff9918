"""Checks: the blocking `retrieval_eval` gate, and the end-of-graph currency check."""


import hashlib
from typing import Any

import dagster as dg

from brain_pipeline.config import BrainConfig
from brain_pipeline.defs.common import claim_build_dir, layout_for, to_metadata
from brain_pipeline.defs.ingest import CORPUS, EVAL_FIXTURE
from brain_pipeline.defs.resources import BrainSettings
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.records import digest_of, read_record

CHECK_NAME = "retrieval_eval"
EVAL_CODE_VERSION = "eval-1"


def evaluation_inputs(cfg: BrainConfig, layout: StateLayout) -> dict[str, Any] | None:
    """Everything an evaluation result depends on, or None when the store was never built.

    The same dict is computed by the check (to reuse an unchanged result) and by the
    publish gate (to find the result for exactly the bytes it would publish).
    """
    store = read_record(layout, "knowledge_store")
    if store is None:
        return None
    vectors = read_record(layout, "embeddings")
    try:
        fixture_sha = hashlib.sha256(cfg.evaluation.fixture.read_bytes()).hexdigest()
    except OSError:
        fixture_sha = None
    return {
        "store": store.data_version,
        "embeddings": vectors.data_version if vectors is not None else None,
        "fixture": fixture_sha,
        "thresholds": cfg.evaluation.model_dump(mode="json")["thresholds"],
        "provider": cfg.effective_provider(),
        "model": cfg.effective_model(),
        "code": EVAL_CODE_VERSION,
    }


def evaluation_key(inputs: dict[str, Any]) -> str:
    return digest_of(inputs)


def build_retrieval_eval(cfg: BrainConfig) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset="embeddings",
        name=CHECK_NAME,
        blocking=True,
        additional_deps=[EVAL_FIXTURE],
        description=(
            "Runs the labelled fixture through the legacy baseline, BM25 and hybrid retrieval "
            "on the built store and vectors. Fails (ERROR, blocking) when a threshold from "
            "corpus_config.yaml is missed, when the fixture names chunks the store no longer "
            "has, or when the store is empty — and then nothing downstream is published. A "
            "result whose inputs (store, vectors, fixture, thresholds, code) are unchanged is "
            "reused and says so."
        ),
    )
    def retrieval_eval(
        context: dg.AssetCheckExecutionContext, settings: BrainSettings
    ) -> dg.AssetCheckResult:
        from brain_pipeline.services import evaluate_build
        from brain_pipeline.state import eval_record

        cfg = settings.load()
        claim_build_dir(context.instance, cfg.build_dir)
        layout = layout_for(cfg)
        inputs = evaluation_inputs(cfg, layout)
        key = evaluation_key(inputs) if inputs is not None else None
        reused = eval_record.lookup(layout, key) if key is not None else None
        if reused is not None:
            failures = list(reused["failures"])
            flat = dict(reused["figures"])
            markdown = str(reused["markdown"])
            stale = list(reused.get("stale_ids", []))
        else:
            outcome = evaluate_build(cfg)
            failures, flat, markdown = outcome.failures, outcome.flat_metrics, outcome.markdown
            stale = outcome.stale_ids
            if key is not None:
                eval_record.save(
                    layout,
                    key,
                    {
                        "passed": not failures,
                        "failures": failures,
                        "figures": flat,
                        "markdown": markdown,
                        "stale_ids": stale,
                        "inputs": inputs,
                        "run_id": context.run.run_id,
                    },
                )
        for failure in failures:
            context.log.error(f"retrieval_eval: {failure}")
        metadata: dict[str, object] = dict(flat)
        if inputs is not None:
            metadata["store_sha256"] = inputs["store"]
            metadata["embeddings_version"] = inputs["embeddings"] or "—"
            metadata["fixture_sha256"] = inputs["fixture"] or "missing"
        metadata["evaluation_key"] = key or "—"
        metadata["reused"] = reused is not None
        if reused is not None:
            metadata["reused_from_run"] = str(reused.get("run_id") or "—")
        metadata["fixture"] = str(cfg.evaluation.fixture)
        metadata["failures"] = "\n".join(failures) or "none"
        metadata["stale_ids"] = ", ".join(stale) or "none"
        result_metadata = to_metadata(metadata)
        result_metadata["evaluation"] = dg.MetadataValue.md(markdown)
        reason = "; ".join(failures)
        return dg.AssetCheckResult(
            passed=not failures,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata=result_metadata,
            description=("passed" if not failures else reason[:500])
            + (" (unchanged inputs: result reused)" if reused is not None else ""),
        )

    return retrieval_eval


def latest_observed_digest(instance: dg.DagsterInstance) -> str | None:
    """The corpus digest of the newest observation of `corpus` (any run or sensor)."""
    from dagster._core.definitions.data_version import extract_data_version_from_entry

    record = instance.get_latest_data_version_record(CORPUS, is_source=True)
    version = extract_data_version_from_entry(record.event_log_entry) if record else None
    return version.value if version is not None else None
