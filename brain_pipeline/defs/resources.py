"""Dagster resources: the configuration, the build directory's run locks, and the two
outside clients, each configured by its own fields.

- `BrainSettings` is corpus_config.yaml (BRAIN_CONFIG, else ./corpus_config.yaml) plus
  the environment, re-read when a run starts.
- `RunLocks` holds the build directory's lock (and the publish root's when the run
  publishes) for the whole run, whoever launched it.
- `EmbeddingClient` builds the document embedder; its `api_key` is a `dg.EnvVar`, so the
  key is resolved in the run's process and never appears in the UI or a run's config.
  The field is only set when a key variable is set at load: an unset EnvVar fails the
  run, and the default needs no key at all.
- `S3Publisher` builds the boto3 client from its bucket, prefix, region, endpoint and
  timeouts (from `publish.s3` and its variables when the code location loads);
  credentials come from the usual AWS chain.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import dagster as dg

from brain_pipeline.config import GEMINI_KEY_VARIABLES, BrainConfig, load_config
from brain_pipeline.lib.code_location import location_config, location_config_path
from brain_pipeline.lib.steps import PUBLISH_ASSETS

if TYPE_CHECKING:
    from brain_pipeline.publishing.source import ArtifactSource


class RunLocks(dg.ConfigurableResource):
    """The build directory's write lock (and the publish root's) for the run's duration.

    Re-entrant, so the CLI's own hold is not waited for. A resource rather than a step
    prologue so that a run launched from the UI, a schedule or automation holds exactly
    what a CLI run holds, from before its first step to after its last.
    """

    config_path: str | None = None

    @contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext) -> Iterator[RunLocks]:
        from brain_pipeline.state.lock import hold_run_locks, make_holder

        cfg = load_config(self.config_path)
        run = context.run
        names = {key.to_user_string() for key in (run.asset_selection or set())} if run else set()
        publishes = not names or bool(names & PUBLISH_ASSETS)
        with hold_run_locks(
            cfg.build_dir,
            cfg.publish_root() if publishes else None,
            wait_seconds=cfg.locks.wait_seconds,
            holder=make_holder("dagster run", run.run_id if run else None),
            on_wait=context.log.info if context.log else None,
        ):
            yield self


class BrainSettings(dg.ConfigurableResource):
    """The validated configuration; every step loads it first. Holds the run's locks.

    `config_path` lets a test or a deployment point at another file without touching
    the environment. Secrets are never part of this resource's fields.
    """

    config_path: str | None = None
    locks: RunLocks

    def load(self) -> BrainConfig:
        return load_config(self.config_path)


class EmbeddingClient(dg.ConfigurableResource):
    """The document embedder the configuration selects: Gemini (google-genai) or local.

    `api_key` and `base_url` configure the Gemini client; model, dimension and pacing are
    the configuration's (they decide the vectors' bytes, so they are code versions).
    """

    api_key: str | None = None
    base_url: str | None = None

    def embedder(self, cfg: BrainConfig) -> Any:
        from brain_pipeline.evaluation.service import embedder_for

        return embedder_for(cfg, api_key=self.api_key, base_url=self.base_url)


class S3Publisher(dg.ConfigurableResource):
    """Uploads a publication with boto3 to `bucket`/`prefix`."""

    bucket: str | None = None
    prefix: str = ""
    region: str | None = None
    endpoint_url: str | None = None
    include_embeddings: bool = False
    connect_timeout_seconds: float = 5.0
    read_timeout_seconds: float = 20.0
    deadline_seconds: float = 60.0

    @classmethod
    def from_config(cls, cfg: BrainConfig) -> S3Publisher:
        s3 = cfg.publish.s3
        return cls(
            bucket=s3.bucket,
            prefix=s3.prefix,
            region=s3.region,
            endpoint_url=s3.endpoint_url,
            include_embeddings=s3.include_embeddings,
            connect_timeout_seconds=s3.connect_timeout_seconds,
            read_timeout_seconds=s3.read_timeout_seconds,
            deadline_seconds=s3.deadline_seconds,
        )

    def publish(
        self,
        cfg: BrainConfig,
        store: ArtifactSource,
        embeddings: ArtifactSource | None,
        manifest: Any,
        retain: frozenset[str] = frozenset(),
    ) -> Any:
        """Upload the build's files (`publishing.source.ArtifactSource`s, streamed),
        keeping the objects in `retain` (the generations a rollback can reach)."""
        from brain_pipeline.publishing.s3 import publish_s3
        from brain_pipeline.publishing.s3_client import S3Timeouts

        return publish_s3(
            store,
            embeddings,
            bucket=self.bucket,
            prefix=self.prefix,
            region=self.region,
            endpoint_url=self.endpoint_url,
            include_embeddings=self.include_embeddings,
            manifest=manifest,
            timeouts=S3Timeouts.from_settings(self),
            retain=retain,
        )


def _gemini_key() -> Any:
    """An EnvVar naming the first key variable that is set, else None (see the module)."""
    for name in GEMINI_KEY_VARIABLES:
        if os.environ.get(name, "").strip():
            return dg.EnvVar(name)
    return None


@dg.definitions
def resource_definitions() -> dg.Definitions:
    """The resources every asset takes, and the in-process executor (a step per process
    would cost seconds per run on a graph this small)."""
    config_path = location_config_path()
    return dg.Definitions(
        resources={
            "settings": BrainSettings(
                config_path=config_path, locks=RunLocks(config_path=config_path)
            ),
            "embedding_client": EmbeddingClient(
                api_key=_gemini_key(), base_url=os.environ.get("GOOGLE_GEMINI_BASE_URL") or None
            ),
            "s3_publisher": S3Publisher.from_config(location_config()),
        },
        executor=dg.in_process_executor,
    )
