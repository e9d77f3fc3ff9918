"""The code location: `@dg.definitions` for `dg` and workspace.yaml; `build_definitions`
for the CLI and the tests.

Loading it has no side effect: nothing is read from or written to the instance (dead
runs are reaped by the commands that own the instance: `brain-pipeline ui` before it
starts the web UI, `brain-pipeline materialize` under its lock).
"""

from __future__ import annotations

import dagster as dg

from brain_pipeline.config import load_config
from brain_pipeline.defs.automation import (
    build_automation_sensor,
    build_observation_sensor,
    build_reingest_schedule,
    reingest_job,
)
from brain_pipeline.defs.checks import build_retrieval_eval
from brain_pipeline.defs.embed import build_embeddings_asset
from brain_pipeline.defs.health import HEALTH_CHECKS, build_freshness_check
from brain_pipeline.defs.ingest import (
    build_knowledge_chunks,
    build_knowledge_store,
    corpus,
    eval_fixture,
)
from brain_pipeline.defs.publish import published_local, published_s3
from brain_pipeline.defs.resources import BrainSettings, EmbeddingClient, S3Publisher


def build_definitions(config_path: str | None = None) -> dg.Definitions:
    """Definitions for one configuration file (None: BRAIN_CONFIG or ./corpus_config.yaml).

    Code versions, kinds and the automation's defaults are read from the configuration
    when the code location loads (a change of model or junk limits is a code-version
    change Dagster shows); assets re-read it at run time through the resource.
    """
    cfg = load_config(config_path)
    return dg.Definitions(
        assets=[
            corpus,
            eval_fixture,
            build_knowledge_chunks(cfg),
            build_knowledge_store(cfg),
            build_embeddings_asset(cfg),
            published_local,
            published_s3,
        ],
        asset_checks=[build_retrieval_eval(cfg), build_freshness_check(cfg), *HEALTH_CHECKS],
        jobs=[reingest_job],
        schedules=[build_reingest_schedule(cfg)],
        sensors=[build_observation_sensor(cfg), build_automation_sensor(cfg)],
        resources={
            "settings": BrainSettings(config_path=config_path),
            "embedding_client": EmbeddingClient(),
            "s3_publisher": S3Publisher(),
        },
        executor=dg.in_process_executor,
    )


@dg.definitions
def defs() -> dg.Definitions:
    """What `dg dev`, `dg list defs` and workspace.yaml load.

    The configuration is BRAIN_CONFIG, else ./corpus_config.yaml.
    """
    return build_definitions()
