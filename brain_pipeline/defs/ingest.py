"""Group `ingest`: the observed `corpus` and `eval_fixture`, then chunks and the store.

`corpus` is an observable source asset whose data version is the corpus digest, so
Dagster itself knows when the corpus changed: the chunks become stale and automation
re-runs what the change affects. The steps are `steps.ingest`.
"""

import contextlib

import dagster as dg

from brain_pipeline.config import BrainConfig
from brain_pipeline.corpus.observation import CorpusSnapshot
from brain_pipeline.defs.hand_off import RECORD_TYPE
from brain_pipeline.defs.health import step_check_results, step_check_specs
from brain_pipeline.defs.resources import BrainSettings
from brain_pipeline.lib.code_location import location_config
from brain_pipeline.lib.conditions import chunks_condition, downstream_condition, run_trigger
from brain_pipeline.lib.dagster_private import observation
from brain_pipeline.lib.steps import (
    CORPUS,
    EVAL_FIXTURE,
    latest_corpus_observation,
    materialize_result,
    preflight_run,
    start_step,
    step_failures,
    to_metadata,
)
from brain_pipeline.state.records import AssetRecord
from brain_pipeline.steps.ingest import (
    STORE_CODE_VERSION,
    assemble_knowledge_store,
    chunk_corpus,
    chunks_code_version,
    fixture_version,
    observe,
    snapshot_facts,
)
from brain_pipeline.steps.trigger import with_trigger


@dg.multi_observable_source_asset(
    specs=[
        dg.AssetSpec(
            CORPUS,
            group_name="ingest",
            description=(
                "The curated content as it is on disk: one folder per area. Observing it walks the "
                "corpus and re-hashes only files whose size or mtime changed; its data version is "
                "the corpus digest (paths and content hashes), so a touch changes nothing and any "
                "edit makes the chunks stale."
            ),
        )
    ],
    name="corpus",
)
def corpus(context: dg.AssetExecutionContext, settings: BrainSettings) -> dg.ObserveResult:
    cfg = start_step(context.instance, settings, context.run)  # refuse before any work
    snapshot = observe(cfg)
    return dg.ObserveResult(
        data_version=dg.DataVersion(snapshot.digest),
        metadata=to_metadata(snapshot_facts(snapshot, str(cfg.build_dir))),
    )


@dg.multi_observable_source_asset(
    specs=[
        dg.AssetSpec(
            EVAL_FIXTURE,
            group_name="ingest",
            description=(
                "The hand-labelled retrieval fixture (evaluation.fixture); its data version is the "
                "hash of its bytes, so editing it re-runs the retrieval_eval check."
            ),
        )
    ],
    name="eval_fixture",
)
def eval_fixture(context: dg.AssetExecutionContext, settings: BrainSettings) -> dg.ObserveResult:
    cfg = settings.load()
    # A missing or unparsable fixture is a failed observation, never a success: the run's
    # preflight (its selection includes this source, so the fixture is checked) stops here,
    # saying how to make one, before anything is embedded or published.
    preflight_run(context.run, cfg)
    return dg.ObserveResult(
        data_version=dg.DataVersion(fixture_version(cfg)),
        metadata={"path": dg.MetadataValue.path(str(cfg.evaluation.fixture))},
    )


def _snapshot_for_run(context: dg.AssetExecutionContext, cfg: BrainConfig) -> CorpusSnapshot:
    """The snapshot this run chunks: its own observation's, else a fresh observation.

    A fresh observation that differs from the last one Dagster knows is recorded as an
    observation of `corpus`, so the lineage names the corpus version that was read.
    """
    from brain_pipeline.config import memory_of
    from brain_pipeline.corpus.observation import SnapshotNotFoundError, load_snapshot

    known, observed_by = latest_corpus_observation(context.instance)
    if known is not None and observed_by == context.run.run_id:  # this run's own step
        with contextlib.suppress(SnapshotNotFoundError):  # gone or damaged: observe again
            return load_snapshot(memory_of(cfg), known)
    snapshot = observe(cfg)
    if known != snapshot.digest:
        # An observation of another asset: no ObserveResult can be returned from this step.
        context.log_event(
            observation(
                CORPUS,
                snapshot.digest,
                to_metadata(snapshot_facts(snapshot, str(cfg.build_dir))),
            )
        )
    return snapshot


def build_knowledge_chunks(cfg: BrainConfig) -> dg.AssetsDefinition:
    @dg.asset(
        name="knowledge_chunks",
        dagster_type=RECORD_TYPE,
        group_name="ingest",
        deps=[CORPUS],
        kinds={"python"},
        code_version=chunks_code_version(cfg),
        automation_condition=chunks_condition(),
        check_specs=step_check_specs("knowledge_chunks"),
        owners=["team:knowledge"],
        tags={"domain": "ingest"},
        description=(
            "Paragraph chunks (text files) and roadmap statements (JSON) of the observed "
            "corpus snapshot, with provenance (area, source, heading) and content-addressed "
            "ids. Cached per file by content hash: only files whose bytes changed are "
            "chunked again."
        ),
    )
    def knowledge_chunks(
        context: dg.AssetExecutionContext, settings: BrainSettings
    ) -> dg.MaterializeResult:
        cfg = start_step(context.instance, settings, context.run)
        # Why this run exists (sensor, fired conditions, schedule or a person): steps.trigger.
        triggered_by = run_trigger(context.instance, context.run.tags, context.asset_key)
        snapshot = _snapshot_for_run(context, cfg)
        with step_failures():
            result = chunk_corpus(cfg, snapshot, run_id=context.run.run_id, log=context.log)
        return materialize_result(
            with_trigger(result, triggered_by),
            step_check_results("knowledge_chunks", cfg, context.log),
        )

    return knowledge_chunks


def build_knowledge_store(cfg: BrainConfig) -> dg.AssetsDefinition:
    @dg.asset(
        name="knowledge_store",
        dagster_type=RECORD_TYPE,
        group_name="ingest",
        kinds={"python", "json"},
        code_version=STORE_CODE_VERSION,
        automation_condition=downstream_condition(),
        check_specs=step_check_specs("knowledge_store"),
        owners=["team:knowledge"],
        tags={"domain": "ingest"},
        description=(
            "knowledge-store.json in the build directory: chunks de-duplicated by content id "
            "across the whole corpus (first occurrence wins), byte-identical to what the "
            "agent's original ingest wrote (JSON.stringify(chunks, null, 2)). Assembled from "
            "the per-file chunk cache; rewritten atomically, and only when its bytes change."
        ),
    )
    def knowledge_store(
        context: dg.AssetExecutionContext,
        settings: BrainSettings,
        knowledge_chunks: AssetRecord,
    ) -> dg.MaterializeResult:
        cfg = start_step(context.instance, settings, context.run)
        with step_failures():
            result = assemble_knowledge_store(
                cfg, knowledge_chunks, run_id=context.run.run_id, log=context.log
            )
        return materialize_result(
            result, step_check_results("knowledge_store", cfg, context.log, context.run.run_id)
        )

    return knowledge_store


@dg.definitions
def ingest_definitions() -> dg.Definitions:
    """The ingest group: the two observed sources, the chunks and the store."""
    cfg = location_config()
    return dg.Definitions(
        assets=[corpus, eval_fixture, build_knowledge_chunks(cfg), build_knowledge_store(cfg)]
    )
