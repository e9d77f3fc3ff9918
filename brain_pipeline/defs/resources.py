"""Dagster resources: the validated configuration and the two outside clients.

The clients are resources so the UI lists them and names the environment variables
they depend on. The variables themselves are resolved by the configuration layer
(`brain_pipeline.config`), not by `dg.EnvVar`: an unset EnvVar fails the run's config,
which would break the default that needs no key at all.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg

from brain_pipeline.config import GEMINI_KEY_VARIABLES, BrainConfig, load_config, variables_for
from brain_pipeline.lib.code_location import location_config_path
from brain_pipeline.lib.steps import PUBLISH_ASSETS


class BrainSettings(dg.ConfigurableResource):
    """corpus_config.yaml (BRAIN_CONFIG, else ./corpus_config.yaml) plus the environment.

    `config_path` lets a test or a deployment point at another file without touching
    the environment. Secrets are never part of this resource's fields.
    """

    config_path: str | None = None

    def load(self) -> BrainConfig:
        return load_config(self.config_path)

    @contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext) -> Iterator["BrainSettings"]:
        """Hold the build directory's lock (and the publish root's when the run publishes)
        for the run, whoever launched it: UI, schedule, automation or the CLI (re-entrant,
        so the CLI's own hold is not waited for)."""
        from brain_pipeline.state.lock import hold_run_locks, make_holder

        cfg = self.load()
        run = context.dagster_run
        names = {key.to_user_string() for key in (run.asset_selection or set())} if run else set()
        publishes = not names or bool(names & PUBLISH_ASSETS)
        run_id = run.run_id if run else None
        with hold_run_locks(
            cfg.build_dir,
            cfg.publish_root() if publishes else None,
            wait_seconds=cfg.locks.wait_seconds,
            holder=make_holder("dagster run", run_id),
            on_wait=context.log.info if context.log else None,
        ):
            yield self


class EmbeddingClient(dg.ConfigurableResource):
    """The document embedder the configuration selects: Gemini (google-genai) or local.

    Gemini's key comes from the first set variable of `key_variables`; the endpoint from
    `base_url_variable`; model and dimension from `setting_variables` or the file.
    """

    key_variables: list[str] = list(GEMINI_KEY_VARIABLES)
    base_url_variable: str = "GOOGLE_GEMINI_BASE_URL"
    setting_variables: list[str] = variables_for("embedding.")

    def embedder(self, cfg: BrainConfig) -> Any:
        from brain_pipeline.evaluation.service import embedder_for

        return embedder_for(cfg)


class S3Publisher(dg.ConfigurableResource):
    """Uploads a publication with boto3; bucket, region and endpoint from the variables
    named here (or publish.s3 in the file), credentials from the usual AWS chain."""

    setting_variables: list[str] = variables_for("publish.s3.")
    credential_variables: list[str] = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"]

    def publish(
        self, cfg: BrainConfig, store_bytes: bytes, embeddings_bytes: bytes | None, manifest: Any
    ) -> Any:
        from brain_pipeline.publishing.s3 import S3Timeouts, publish_s3

        s3 = cfg.publish.s3
        return publish_s3(
            store_bytes,
            embeddings_bytes,
            bucket=s3.bucket,
            prefix=s3.prefix,
            region=s3.region,
            endpoint_url=s3.endpoint_url,
            include_embeddings=s3.include_embeddings,
            manifest=manifest,
            timeouts=S3Timeouts.from_settings(s3),
        )


@dg.definitions
def resource_definitions() -> dg.Definitions:
    """The resources every asset takes, and the in-process executor (a step per process
    would cost seconds per run on a graph this small)."""
    return dg.Definitions(
        resources={
            "settings": BrainSettings(config_path=location_config_path()),
            "embedding_client": EmbeddingClient(),
            "s3_publisher": S3Publisher(),
        },
        executor=dg.in_process_executor,
    )
