"""How runs start without a person: the nightly schedule and declarative automation.

- `reingest_schedule` runs `reingest_job` (every asset, both observations, the checks)
  unconditionally every night: `on_cron` automation would not fire on a quiet corpus,
  and a nightly run is also what refreshes the evaluation and the publication.
- `corpus_observation_sensor` observes the corpus and the fixture and records an
  `AssetObservation` with a data-version tag only when a digest changed (its cursor is
  the two digests, never per-file state, so each tick stores a few bytes). It launches
  nothing: one launcher per change.
- `automation_sensor` is that launcher. It evaluates the assets' automation conditions
  (`lib.conditions`: `knowledge_chunks` on `eager()` or a corpus version it has not
  read, and why `eager()` alone would lose edits), so one edit makes one run: the chunks,
  then the store and the vectors and `retrieval_eval` in the same run; the publish steps
  only once every blocking check upstream has passed (their own gate refuses otherwise).
"""

from __future__ import annotations

import json

import dagster as dg

from brain_pipeline.config import BrainConfig, load_config
from brain_pipeline.lib.code_location import location_config
from brain_pipeline.lib.instance import BUILD_DIR_TAG, build_dir_tag_value
from brain_pipeline.steps.trigger import TRIGGER_TAG

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
        description=(
            "Observes the corpus and the fixture (a stat per file; only changed files are "
            "hashed); records an observation with the new data version when either digest "
            "changed. It launches nothing: automation_sensor sees the new version and "
            "launches the one rebuild run."
        ),
    )
    def corpus_observation_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        from brain_pipeline.lib.dagster_private import observation
        from brain_pipeline.lib.steps import CORPUS, EVAL_FIXTURE
        from brain_pipeline.steps.ingest import fixture_version, observe

        live = load_config(cfg.config_path) if cfg.config_path else cfg
        before = json.loads(context.cursor) if context.cursor else {}
        snapshot = observe(live)
        after = {"corpus": snapshot.digest, "fixture": fixture_version(live)}
        changed = [name for name in ("corpus", "fixture") if before.get(name) != after[name]]
        keys = {"corpus": CORPUS, "fixture": EVAL_FIXTURE}
        # A sensor records observations as asset events: no ObserveResult there.
        events = [
            observation(
                keys[name],
                after[name],
                {
                    "data_version": dg.MetadataValue.text(after[name]),
                    "previous_data_version": dg.MetadataValue.text(before.get(name) or "—"),
                    "observed_by": dg.MetadataValue.text("corpus_observation_sensor"),
                },
            )
            for name in changed
        ]
        cursor = json.dumps(after, sort_keys=True)
        if not events:
            return dg.SensorResult(
                skip_reason=f"no change (corpus {snapshot.digest[:12]})", cursor=cursor
            )
        summary = ", ".join(
            f"{keys[name].to_user_string()} {(before.get(name) or '—')[:12]} -> {after[name][:12]}"
            for name in changed
        )
        context.log.info(f"recorded observations: {summary}")
        return dg.SensorResult(
            asset_events=events,
            cursor=cursor,
            # Dagster marks a tick without a run SKIPPED; say what it recorded.
            skip_reason=f"recorded {summary}; automation_sensor launches the rebuild",
        )

    return corpus_observation_sensor


def build_automation_sensor(cfg: BrainConfig) -> dg.AutomationConditionSensorDefinition:
    return dg.AutomationConditionSensorDefinition(
        "automation_sensor",
        target=dg.AssetSelection.all(),
        default_status=_status(cfg.schedule.sensor_enabled),
        minimum_interval_seconds=cfg.schedule.sensor_min_interval_seconds,
        # corpus_version_unconsumed is evaluated in Python, so in the code location.
        use_user_code_server=True,
        run_tags={
            BUILD_DIR_TAG: build_dir_tag_value(cfg.build_dir),
            TRIGGER_TAG: "automation_sensor (conditions: see the run's evaluation)",
        },
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
