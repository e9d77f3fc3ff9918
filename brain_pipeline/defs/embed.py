"""Asset `embeddings` (group embed): incremental, paced, resumable document vectors
(the step: `steps.embed`)."""

import dagster as dg

from brain_pipeline.config import BrainConfig
from brain_pipeline.defs.hand_off import RECORD_TYPE
from brain_pipeline.defs.health import step_check_results, step_check_specs
from brain_pipeline.defs.resources import BrainSettings, EmbeddingClient
from brain_pipeline.lib.code_location import location_config
from brain_pipeline.lib.conditions import downstream_condition
from brain_pipeline.lib.instance import GEMINI_POOL
from brain_pipeline.lib.steps import materialize_result, start_step, step_failures
from brain_pipeline.state.records import AssetRecord
from brain_pipeline.steps.embed import embed_store, embeddings_code_version

PROVIDER_KINDS = {"gemini": "gemini", "local": "onnx"}


def build_embeddings_asset(cfg: BrainConfig) -> dg.AssetsDefinition:
    code_version = embeddings_code_version(cfg)
    provider = cfg.effective_provider()
    kinds = {"python"} | ({PROVIDER_KINDS[provider]} if provider in PROVIDER_KINDS else set())

    @dg.asset(
        name="embeddings",
        dagster_type=RECORD_TYPE,
        group_name="embed",
        kinds=kinds,
        code_version=code_version,
        pool=GEMINI_POOL if provider == "gemini" else None,
        automation_condition=downstream_condition(),
        check_specs=step_check_specs("embeddings"),
        owners=["team:knowledge"],
        tags={"domain": "embed"},
        description=(
            "One int8 vector per live chunk in embeddings.bin (PATBEMB1), built incrementally: "
            "vectors are reused by chunk id, orphans pruned, every batch packed for any worker, "
            "requests paced against the texts-per-minute quota. Provider from the "
            f"configuration when the code location loaded: {provider}."
        ),
    )
    def embeddings(
        context: dg.AssetExecutionContext,
        settings: BrainSettings,
        embedding_client: EmbeddingClient,
        knowledge_store: AssetRecord,
    ) -> dg.MaterializeResult:
        cfg = start_step(context.instance, settings, context.run)
        with step_failures():
            result = embed_store(
                cfg,
                knowledge_store,
                make_embedder=embedding_client.embedder,
                run_id=context.run.run_id,
                log=context.log,
            )
        return materialize_result(result, step_check_results("embeddings", cfg, context.log))

    return embeddings


@dg.definitions
def embed_definitions() -> dg.Definitions:
    return dg.Definitions(assets=[build_embeddings_asset(location_config())])
