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
- `EmbeddingClient` builds the document embedder. Its fields show the provider, model,
  dimension and too_long policy the vectors are made with; its `api_key` is a
  `dg.EnvVar`, so the key is resolved in the run's process and never appears in the UI
  or a run's config. The key field is only set when a key variable is set at load: an
  unset EnvVar fails the run, and the default needs no key at all.
- `S3Publisher` uploads with boto3; its fields show the bucket, prefix, region, endpoint
  and whether vectors go too (`publish.s3` and its variables); credentials come from the
  usual AWS chain.

Both outside clients' fields are read from the configuration when the code location
loads, so the UI shows them; a run whose own snapshot disagrees (the file was edited
and the location not reloaded) refuses at the step that would use them, naming the
setting. A run launched by the CLI, the schedule or automation loads the location
afresh, so they agree.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import dagster as dg
from pydantic import PrivateAttr

from brain_pipeline.config import GEMINI_KEY_VARIABLES, BrainConfig, load_config
from brain_pipeline.lib.code_location import location_config, location_config_path
from brain_pipeline.lib.steps import PUBLISH_ASSETS

if TYPE_CHECKING:
    from brain_pipeline.publishing.source import ArtifactSource


class RunLocks(dg.ConfigurableResource):
    """The run's configuration, read once when the run starts, and the locks it names.

    Holds the build directory's write lock (and the publish root's) for the run's
    duration; re-entrant, so the CLI's own hold is not waited for. Under it, it starts
    and ends the run's up-to-date record (`steps.up_to_date.run_started`, `run_ended`).
    A resource rather than a step prologue so that a run launched from the UI, a
    schedule or automation reads and holds exactly what a CLI run does, from before its
    first step to after its last.
    """

    config_path: str | None = None
    _config: BrainConfig | None = PrivateAttr(default=None)

    @contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext) -> Iterator[RunLocks]:
        from brain_pipeline.defs.up_to_date import selection_names
        from brain_pipeline.state.lock import hold_run_locks, make_holder
        from brain_pipeline.steps import up_to_date

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
            if run is None:
                yield self
                return
            # Every run, whoever launched it: no "up to date" until this one is proven,
            # and after its last step what it left, for the record (steps.up_to_date).
            up_to_date.run_started(cfg, run.run_id, *selection_names(run))
            try:
                yield self
            finally:
                try:
                    up_to_date.run_ended(cfg, run.run_id)
                except OSError as exc:  # the next command then runs in full; the run stands
                    if context.log:
                        context.log.warning(f"the up-to-date record was not written: {exc}")

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

    `provider`, `model`, `dimension` and `too_long` are the settings that decide the
    vectors' bytes, as the code location read them from the configuration: the UI shows
    them on the resource's page. A run embeds with its own snapshot of the configuration;
    when that says otherwise (the file was edited after the location loaded) the step
    refuses, naming the setting, rather than record vectors under the wrong settings.
    `api_key` and `base_url` configure the Gemini client.
    """

    provider: str = "none"
    model: str = ""
    dimension: int = 0
    too_long: str = "truncate"
    api_key: str | None = None
    base_url: str | None = None

    @classmethod
    def for_config(cls, cfg: BrainConfig, **client: Any) -> EmbeddingClient:
        return cls(
            provider=cfg.effective_provider(),
            model=cfg.embedding.model,
            dimension=cfg.embedding.dimension,
            too_long=cfg.embedding.too_long,
            **client,
        )

    def shown(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "model": self.model,
            "dimension": self.dimension,
            "too_long": self.too_long,
        }

    def embedder(self, cfg: BrainConfig) -> Any:
        from brain_pipeline.embedding.factory import embedder_for

        refuse_if_moved("embedding", self.shown(), EmbeddingClient.for_config(cfg).shown())
        return embedder_for(cfg, api_key=self.api_key, base_url=self.base_url)


def refuse_if_moved(section: str, loaded: dict[str, Any], now: dict[str, Any]) -> None:
    """Fail the step when the run's configuration differs from the resource's fields."""
    moved = [f"{section}.{k}: {loaded[k]!r} -> {now[k]!r}" for k in loaded if loaded[k] != now[k]]
    if moved:
        raise dg.Failure(
            description=(
                f"the configuration changed after the code location loaded ({'; '.join(moved)}): "
                "reload the code location (the UI's Reload button, or restart "
                "`brain-pipeline ui`) so the run and the resource agree"
            )
        )


class S3Publisher(dg.ConfigurableResource):
    """Uploads a publication with boto3 where `publish.s3` says.

    Its fields are the configuration's, as the code location read it (the UI shows where
    uploads go); the run's own snapshot must agree, or the step refuses, naming the
    setting (see `EmbeddingClient`). Dagster-aws's `S3Resource` is not used: importing
    it imports boto3 in every run (0.56 CPU-s, docs/ui.md), bucket or none; the
    client is built only when an upload happens.
    """

    bucket: str | None = None
    prefix: str = ""
    region: str | None = None
    endpoint_url: str | None = None
    include_embeddings: bool = False

    @classmethod
    def for_config(cls, cfg: BrainConfig) -> S3Publisher:
        s3 = cfg.publish.s3
        return cls(
            bucket=s3.bucket,
            prefix=s3.prefix,
            region=s3.region,
            endpoint_url=s3.endpoint_url,
            include_embeddings=s3.include_embeddings,
        )

    def shown(self) -> dict[str, Any]:
        return {
            "bucket": self.bucket,
            "prefix": self.prefix,
            "region": self.region,
            "endpoint_url": self.endpoint_url,
            "include_embeddings": self.include_embeddings,
        }

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

        refuse_if_moved("publish.s3", self.shown(), S3Publisher.for_config(cfg).shown())
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
    cfg = location_config()
    return dg.Definitions(
        resources={
            "settings": BrainSettings(
                config_path=config_path, locks=RunLocks(config_path=config_path)
            ),
            "embedding_client": EmbeddingClient.for_config(
                cfg,
                api_key=_gemini_key(),
                base_url=os.environ.get("GOOGLE_GEMINI_BASE_URL") or None,
            ),
            "s3_publisher": S3Publisher.for_config(cfg),
        },
        executor=dg.in_process_executor,
    )
