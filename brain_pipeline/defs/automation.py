"""How runs start without a person: the nightly schedule and declarative automation.

- `reingest_schedule` runs `reingest_job` (every asset, both observations, the checks)
  unconditionally every night: `on_cron` automation would not fire on a quiet corpus,
  and a nightly run is also what refreshes the evaluation and the publication.
- `corpus_observation_sensor` observes the corpus and the fixture and records an
  `AssetObservation` with a data-version tag only when a digest changed (its cursor is
  the two digests, never per-file state, so each tick stores a few bytes). It launches
  no run itself.
- `automation_sensor` evaluates the assets' automation conditions: a new corpus data
  version makes the chunks, the store and the vectors eager to update, and the publish
  steps follow only once every blocking check of their dependencies has passed.
"""

from __future__ import annotations

import json

import dagster as dg

from brain_pipeline.config import BrainConfig, load_config
from brain_pipeline.lib.code_location import location_config
from brain_pipeline.lib.instance import BUILD_DIR_TAG, build_dir_tag_value
from brain_pipeline.lib.steps import CORPUS, DATA_VERSION_TAG, EVAL_FIXTURE

reingest_job = dg.define_asset_job(
    name="reingest_job",
    selection=dg.AssetSelection.all(include_sources=True),
    description=(
        "Observe the corpus and the fixture, then every asset and check: chunk, assemble, "
        "embed, evaluate, publish."
    ),
)


def _status(enabled: bool) -> dg.DefaultSensorStatus:
    return dg.DefaultSensorStatus.RUNNING if enabled else dg.DefaultSensorStatus.STOPPED


def build_reingest_schedule(cfg: BrainConfig) -> dg.ScheduleDefinition:
    """Cron and time zone come from corpus_config.yaml (`schedule.cron`, `schedule.timezone`)."""
    return dg.ScheduleDefinition(
        name="reingest_schedule",
        job=reingest_job,
        cron_schedule=cfg.schedule.cron,
        execution_timezone=cfg.schedule.timezone,
        default_status=(
            dg.DefaultScheduleStatus.RUNNING
            if cfg.schedule.enabled
            else dg.DefaultScheduleStatus.STOPPED
        ),
        tags={BUILD_DIR_TAG: build_dir_tag_value(cfg.build_dir)},
        description=f"Re-ingest the corpus on '{cfg.schedule.cron}' ({cfg.schedule.timezone}).",
    )


def build_observation_sensor(cfg: BrainConfig) -> dg.SensorDefinition:
    @dg.sensor(
        name="corpus_observation_sensor",
        minimum_interval_seconds=cfg.schedule.sensor_min_interval_seconds,
        default_status=_status(cfg.schedule.sensor_enabled),
        asset_selection=[CORPUS, EVAL_FIXTURE],
        description=(
            "Observes the corpus and the fixture; records an observation with the new data "
            "version when either digest changed. Launches no run: automation_sensor does."
        ),
    )
    def corpus_observation_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        from brain_pipeline.steps.ingest import fixture_version, observe

        live = load_config(cfg.config_path) if cfg.config_path else cfg
        before = json.loads(context.cursor) if context.cursor else {}
        snapshot = observe(live)
        after = {"corpus": snapshot.digest, "fixture": fixture_version(live)}
        events = [
            dg.AssetObservation(asset_key=key, tags={DATA_VERSION_TAG: after[name]})
            for name, key in (("corpus", CORPUS), ("fixture", EVAL_FIXTURE))
            if before.get(name) != after[name]
        ]
        cursor = json.dumps(after, sort_keys=True)
        if not events:
            return dg.SensorResult(
                skip_reason=f"no change (corpus {snapshot.digest[:12]})", cursor=cursor
            )
        context.log.info(
            "observed new data versions: "
            + ", ".join(f"{e.asset_key.to_user_string()}" for e in events)
        )
        return dg.SensorResult(asset_events=events, cursor=cursor)

    return corpus_observation_sensor


def build_automation_sensor(cfg: BrainConfig) -> dg.AutomationConditionSensorDefinition:
    return dg.AutomationConditionSensorDefinition(
        "automation_sensor",
        target=dg.AssetSelection.all(),
        default_status=_status(cfg.schedule.sensor_enabled),
        minimum_interval_seconds=cfg.schedule.sensor_min_interval_seconds,
        run_tags={BUILD_DIR_TAG: build_dir_tag_value(cfg.build_dir)},
        description=(
            "Materialises what a corpus change affects (eager conditions); publishing waits "
            "for every blocking check upstream to pass."
        ),
    )


@dg.definitions
def automation_definitions() -> dg.Definitions:
    """The nightly schedule, its job, the corpus observation sensor and automation."""
    cfg = location_config()
    return dg.Definitions(
        jobs=[reingest_job],
        schedules=[build_reingest_schedule(cfg)],
        sensors=[build_observation_sensor(cfg), build_automation_sensor(cfg)],
    )
