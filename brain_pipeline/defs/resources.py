"""Dagster resources: the run's configuration and locks, and the two outside clients.

One source per setting: a run reads the configuration (corpus_config.yaml, BRAIN_CONFIG,
plus the environment) once, when it starts, and every step, check and resource of that
run uses that one snapshot, so a configuration edit takes effect on the next run, for
all of it at once (an S3 upload goes where the run's metadata says). What the code
location derives when it loads (code versions, kinds, the schedule's cron, the sensors'
intervals) changes when it reloads.

- `BrainSettings` reads that snapshot, hands it to every step (`load()`), and holds the
  ledger's run lease (and the publish root's lock when the run publishes) for the whole
  run, whoever launched it, in-process or a process per step (state.run_lease).
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

Launches cannot move a request or a key. The UI's Launchpad (and any `run_config`) can
set every resource field, so each field that shapes a request — the Gemini endpoint and
key, the S3 bucket, prefix, region and endpoint, the configuration file itself — is
checked against what the location derives from corpus_config.yaml and the environment
before the client is built: a launch that sets `embedding_client.base_url` to another
host, or `api_key` to `{env: AWS_SECRET_ACCESS_KEY}`, is refused with one line naming
the field, and no request leaves. The check never prints a key, an endpoint or a path,
only the field's name.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import dagster as dg
from pydantic import PrivateAttr

from brain_pipeline.config import BrainConfig, gemini_key_variable, load_config
from brain_pipeline.lib.code_location import location_config, location_config_path, was_loaded
from brain_pipeline.lib.steps import PUBLISH_ASSETS

if TYPE_CHECKING:
    from brain_pipeline.publishing.source import ArtifactSource


class BrainSettings(dg.ConfigurableResource):
    """The run's configuration, read once when the run starts, and the locks it names.

    Every step loads the configuration from here first (`load()`). For a run's duration
    the resource holds the ledger's run lease (and the publish root's lock); the lease
    is the run's, so neither the CLI's own hold nor the run's other step processes are
    waited for (state.run_lease). Under it the run's up-to-date record is started
    (`steps.up_to_date.run_started`), once per run.
    A resource rather than a step prologue so that a run launched from the UI, a
    schedule or automation reads and holds exactly what a CLI run does, from before its
    first step to after its last. One resource, not a nested one: Dagster initialises a
    nested resource through a deprecated accessor (`InitResourceContext.dagster_run`).

    `config_path` lets a test or a deployment point at another file without touching
    the environment. Secrets are never part of this resource's fields.
    """

    config_path: str | None = None
    _config: BrainConfig | None = PrivateAttr(default=None)

    @contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext) -> Iterator[BrainSettings]:
        import multiprocessing

        from brain_pipeline.config import memory_of
        from brain_pipeline.defs.up_to_date import selection_names
        from brain_pipeline.lib.instance import run_is_over
        from brain_pipeline.state.lock import make_holder
        from brain_pipeline.state.run_lease import hold_run_locks
        from brain_pipeline.steps import up_to_date

        refuse_unloaded_path("settings", self.config_path)
        cfg = self._config = load_config(self.config_path)
        run = context.run
        names = {key.to_user_string() for key in (run.asset_selection or set())} if run else set()
        publishes = not names or bool(names & PUBLISH_ASSETS)
        # A step process of a multiprocess run (a child of the run's process) holds the
        # lease for its run, not for itself: the run's other steps go on, and the lease
        # goes when the instance says the run is over (state.run_lease).
        step_process = run is not None and multiprocessing.parent_process() is not None
        with hold_run_locks(
            memory_of(cfg).ledger,
            cfg.publish_root() if publishes else None,
            run_id=run.run_id if run else None,
            wait_seconds=cfg.locks.wait_seconds,
            holder=make_holder("dagster run", run.run_id if run else None),
            finished=run_is_over(context.instance) if context.instance else None,
            spans_run=not step_process,
            on_wait=context.log.info if context.log else None,
        ):
            if run is None:
                yield self
                return
            # Every run, whoever launched it: no "up to date" until this one is proven
            # (once per run: a later step process of it finds its own pending entry).
            # What it left is taken when Dagster says it succeeded (`confirm`).
            up_to_date.run_started(cfg, run.run_id, *selection_names(run))
            yield self

    def load(self) -> BrainConfig:
        """The run's snapshot (see the module docstring); outside a run, read now."""
        refuse_unloaded_path("settings", self.config_path)
        return self._config if self._config is not None else load_config(self.config_path)


class EmbeddingClient(dg.ConfigurableResource):
    """The document embedder the configuration selects: Gemini (google-genai) or local.

    `provider`, `model`, `dimension` and `too_long` are the settings that decide the
    vectors' bytes, as the code location read them from the configuration: the UI shows
    them on the resource's page. A run embeds with its own snapshot of the configuration;
    when that says otherwise (the file was edited after the location loaded) the step
    refuses, naming the setting, rather than record vectors under the wrong settings.
    `api_key` (an EnvVar: the UI shows the variable's name) and `base_url` configure the
    Gemini client; a launch that sets either to anything but what the location derives
    (GEMINI_API_KEY/GOOGLE_API_KEY, GOOGLE_GEMINI_BASE_URL) is refused before the client
    is built (`refuse_if_moved`), so the key is never sent anywhere else.
    """

    provider: str = "none"
    model: str = ""
    dimension: int = 0
    too_long: str = "truncate"
    api_key: str | None = None
    base_url: str | None = None

    @classmethod
    def as_loaded(cls, cfg: BrainConfig) -> EmbeddingClient:
        """The resource exactly as the code location builds it from `cfg` and the
        environment: the key by EnvVar name (none when no key variable is set: an unset
        EnvVar fails the run), the endpoint from GOOGLE_GEMINI_BASE_URL."""
        key = gemini_key_variable()
        return cls(
            provider=cfg.effective_provider(),
            model=cfg.embedding.model,
            dimension=cfg.embedding.dimension,
            too_long=cfg.embedding.too_long,
            api_key=dg.EnvVar(key) if key else None,
            base_url=os.environ.get("GOOGLE_GEMINI_BASE_URL") or None,
        )

    def embedder(self, cfg: BrainConfig) -> Any:
        from brain_pipeline.embedding.factory import embedder_for

        refuse_if_moved("embedding_client", self, EmbeddingClient.as_loaded(cfg))
        return embedder_for(cfg, api_key=self.api_key, base_url=self.base_url)


SHOWN_FIELDS = frozenset(
    {
        "provider",
        "model",
        "dimension",
        "too_long",
        "bucket",
        "prefix",
        "region",
        "include_embeddings",
    }
)
"""Fields whose values a refusal may print: settings, never a key, an endpoint or a path
(an endpoint or a path can carry a token or a user name)."""


def _resolved(value: Any) -> Any:
    """A field's value as the run sees it: an EnvVar (the location's form of a key)
    read from this process's environment, as Dagster resolves it for the run."""
    if isinstance(value, dg.EnvVar):
        return value.get_value()
    return value


def _same(run_value: Any, loaded_value: Any) -> bool:
    """Equal, comparing strings in constant time (one of them may be a key)."""
    if isinstance(run_value, str) and isinstance(loaded_value, str):
        return hmac.compare_digest(run_value.encode(), loaded_value.encode())
    return bool(run_value == loaded_value)


def refuse_if_moved(
    resource: str, run: dg.ConfigurableResource, loaded: dg.ConfigurableResource
) -> None:
    """Fail the step, before its client is built, when the run's resource differs from
    what the location derives from the configuration and the environment: the file was
    edited since the location loaded, or the launch set the field (the Launchpad can set
    any resource field; none of ours may come from there). Compared are the values as the
    run sees them (an EnvVar read from this process's environment, as Dagster resolves
    it for the run), in declaration order."""
    moved = [
        name
        for name in type(loaded).model_fields
        if not _same(_resolved(getattr(run, name)), _resolved(getattr(loaded, name)))
    ]
    if not moved:
        return
    named = [
        f"{resource}.{name}: {getattr(run, name)!r} -> {getattr(loaded, name)!r}"
        if name in SHOWN_FIELDS
        else f"{resource}.{name}"
        for name in moved
    ]
    raise dg.Failure(
        description=(
            f"refused before any request: {'; '.join(named)} "
            f"{'is' if len(moved) == 1 else 'are'} not what the code location loaded "
            "(set in the run's launch config, or corpus_config.yaml changed since it "
            "loaded); these come only from corpus_config.yaml and the environment: edit "
            "corpus_config.yaml, not the run's config, and reload the code location (the "
            "UI's Reload button, or restart `brain-pipeline ui`)"
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
        """Each field is the `publish.s3` setting of its name."""
        return cls(**cfg.publish.s3.model_dump(include=set(cls.model_fields)))

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

        refuse_if_moved("s3_publisher", self, S3Publisher.for_config(cfg))
        return upload_to_s3(cfg, store, embeddings, manifest, retain)


def refuse_unloaded_path(resource: str, config_path: str | None) -> None:
    """Fail the run when its launch pointed a resource at a configuration file no code
    location of this process loaded: that file would decide where every request goes."""
    if not was_loaded(config_path):
        raise dg.Failure(
            description=(
                f"refused before any request: {resource}.config_path is not the "
                "configuration the code location loaded (set in the run's launch "
                "config); edit corpus_config.yaml, not the run's config, and reload the "
                "code location"
            )
        )


@dg.definitions
def resource_definitions() -> dg.Definitions:
    """The resources every asset takes, the hand-off between assets (`defs.hand_off`)
    and the in-process executor (a step per process would cost seconds per run on a
    graph this small)."""
    from brain_pipeline.defs.hand_off import ledger_hand_off

    config_path = location_config_path()
    cfg = location_config()
    return dg.Definitions(
        resources={
            "settings": BrainSettings(config_path=config_path),
            "embedding_client": EmbeddingClient.as_loaded(cfg),
            "s3_publisher": S3Publisher.for_config(cfg),
            "io_manager": ledger_hand_off,
        },
        executor=dg.in_process_executor,
    )
