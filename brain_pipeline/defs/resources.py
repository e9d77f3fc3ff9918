"""Dagster resources: the run's configuration and locks, and the two outside clients.

One source per setting: a run reads the configuration (corpus_config.yaml, BRAIN_CONFIG,
plus the environment) once, when it starts, and every step, check and resource of that
run uses that one snapshot, so a configuration edit takes effect on the next run, for
all of it at once (an S3 upload goes where the run's metadata says). What the code
location derives when it loads (code versions, kinds, the schedule's cron, the sensors'
intervals) changes when it reloads.

- `RunLocks` reads that snapshot and holds the build directory's lock (and the publish
  root's when the run publishes) for the whole run, whoever launched it.
- `BrainSettings` hands the snapshot to every step (`load()`).
- `EmbeddingClient` builds the document embedder; its `api_key` is a `dg.EnvVar`, so the
  key is resolved in the run's process and never appears in the UI or a run's config.
  The field is only set when a key variable is set at load: an unset EnvVar fails the
  run, and the default needs no key at all.
- `S3Publisher` uploads with boto3 to the bucket, prefix, region, endpoint and timeouts of
  the run's configuration (`publish.s3` and its variables); credentials come from the
  usual AWS chain.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import dagster as dg
from pydantic import PrivateAttr

from brain_pipeline.config import GEMINI_KEY_VARIABLES, BrainConfig, load_config
from brain_pipeline.lib.code_location import location_config_path
from brain_pipeline.lib.steps import PUBLISH_ASSETS

if TYPE_CHECKING:
    from brain_pipeline.publishing.source import ArtifactSource


class RunLocks(dg.ConfigurableResource):
    """The run's configuration, read once when the run starts, and the locks it names.

    Holds the build directory's write lock (and the publish root's) for the run's
    duration; re-entrant, so the CLI's own hold is not waited for. A resource rather than
    a step prologue so that a run launched from the UI, a schedule or automation reads
    and holds exactly what a CLI run does, from before its first step to after its last.
    """

    config_path: str | None = None
    _config: BrainConfig | None = PrivateAttr(default=None)

    @contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext) -> Iterator[RunLocks]:
        from brain_pipeline.state.lock import hold_run_locks, make_holder

        cfg = self._config = load_config(self.config_path)
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

    def run_config(self) -> BrainConfig | None:
        """The snapshot this run started with (None outside a run)."""
        return self._config


class BrainSettings(dg.ConfigurableResource):
    """The validated configuration of the run; every step loads it first.

    `config_path` lets a test or a deployment point at another file without touching
    the environment. Secrets are never part of this resource's fields.
    """

    config_path: str | None = None
    locks: RunLocks

    def load(self) -> BrainConfig:
        """The run's snapshot (see the module docstring); outside a run, read now."""
        cfg = self.locks.run_config()
        return cfg if cfg is not None else load_config(self.config_path)


class EmbeddingClient(dg.ConfigurableResource):
    """The document embedder the configuration selects: Gemini (google-genai) or local.

    `api_key` and `base_url` configure the Gemini client; model, dimension and pacing are
    the configuration's (they decide the vectors' bytes, so they are code versions).
    """

    api_key: str | None = None
    base_url: str | None = None

    def embedder(self, cfg: BrainConfig) -> Any:
        from brain_pipeline.embedding.factory import embedder_for

        return embedder_for(cfg, api_key=self.api_key, base_url=self.base_url)


class S3Publisher(dg.ConfigurableResource):
    """Uploads a publication with boto3 where the run's configuration says (`publish.s3`).

    It has no settings of its own: fields fixed when the code location loads would be a
    second source beside the configuration the run read, and an edit between two runs
    would send the upload to one bucket while the run's metadata named another.
    """

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
        from brain_pipeline.steps.publish import upload_to_s3

        return upload_to_s3(cfg, store, embeddings, manifest, retain)


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
            "s3_publisher": S3Publisher(),
        },
        executor=dg.in_process_executor,
    )
