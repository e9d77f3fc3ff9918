"""The one `Definitions` object: loaded by workspace.yaml, [tool.dg] and the CLI alike."""

from __future__ import annotations

import dagster as dg

from brain_pipeline.config import load_config
from brain_pipeline.defs.automation import (
    build_corpus_sensor,
    build_reingest_schedule,
    reingest_job,
)
from brain_pipeline.defs.checks import retrieval_eval
from brain_pipeline.defs.embed import embeddings
from brain_pipeline.defs.ingest import corpus_manifest, knowledge_chunks, knowledge_store
from brain_pipeline.defs.publish import published_local, published_s3
from brain_pipeline.defs.resources import BrainSettings

ALL_ASSETS = [
    corpus_manifest,
    knowledge_chunks,
    knowledge_store,
    embeddings,
    published_local,
    published_s3,
]
ALL_CHECKS = [retrieval_eval]


def build_definitions(config_path: str | None = None) -> dg.Definitions:
    """Definitions for one configuration file (None: BRAIN_CONFIG or ./corpus_config.yaml).

    The schedule's cron and the sensor's interval are read from the configuration when
    the code location loads; assets re-read it at run time through the resource.
    """
    cfg = load_config(config_path)
    return dg.Definitions(
        assets=ALL_ASSETS,
        asset_checks=ALL_CHECKS,
        jobs=[reingest_job],
        schedules=[build_reingest_schedule(cfg)],
        sensors=[build_corpus_sensor(cfg)],
        resources={"settings": BrainSettings(config_path=config_path)},
        executor=dg.in_process_executor,
    )


defs = build_definitions()
