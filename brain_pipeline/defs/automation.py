"""The nightly re-ingest schedule and the corpus-changed sensor."""

import hashlib
import json
from typing import Any

import dagster as dg

from brain_pipeline.config import BrainConfig, load_config

reingest_job = dg.define_asset_job(
    name="reingest_job",
    selection=dg.AssetSelection.all(),
    description=(
        "Every asset and the retrieval_eval check: discover, chunk, embed, evaluate, publish."
    ),
)


def _default_status(enabled: bool) -> dg.DefaultScheduleStatus:
    return dg.DefaultScheduleStatus.RUNNING if enabled else dg.DefaultScheduleStatus.STOPPED


def build_reingest_schedule(cfg: BrainConfig) -> dg.ScheduleDefinition:
    """Cron and time zone come from corpus_config.yaml (`schedule.cron`, `schedule.timezone`)."""
    return dg.ScheduleDefinition(
        name="reingest_schedule",
        job=reingest_job,
        cron_schedule=cfg.schedule.cron,
        execution_timezone=cfg.schedule.timezone,
        default_status=_default_status(cfg.schedule.enabled),
        description=f"Re-ingest the corpus on '{cfg.schedule.cron}' ({cfg.schedule.timezone}).",
    )


def corpus_state(cfg: BrainConfig, previous: dict[str, Any] | None) -> dict[str, Any]:
    """Per-file (size, mtime_ns, sha256) of what discovery would ingest.

    Files whose size and mtime are unchanged keep their previous hash, so a tick costs a
    walk and a few stats, not a read of the whole corpus. Only files discovery considers
    (text and roadmap files inside areas) are watched, so the pipeline's own outputs can
    never re-trigger it.
    """
    from brain_pipeline.corpus.discovery import corpus_fingerprint

    prior = {k: tuple(v) for k, v in (previous or {}).items()}
    current = corpus_fingerprint(cfg.corpus_root(), previous=prior)
    return {path: list(entry) for path, entry in current.items()}


def change_key(before: dict[str, Any], after: dict[str, Any]) -> tuple[str, list[str]]:
    """A run key derived from the change (same change -> same key), and the changed paths."""
    changed = sorted(
        path
        for path in set(before) | set(after)
        if (before.get(path) or [None, None, None])[::2]
        != (after.get(path) or [None, None, None])[::2]
    )
    digest = hashlib.sha256(
        json.dumps(
            {p: after.get(p, [None, None, None])[2] for p in changed}, sort_keys=True
        ).encode()
    ).hexdigest()[:16]
    return f"corpus-{digest}", changed


def build_corpus_sensor(cfg: BrainConfig) -> dg.SensorDefinition:
    @dg.sensor(
        name="corpus_changed_sensor",
        job=reingest_job,
        minimum_interval_seconds=cfg.schedule.sensor_min_interval_seconds,
        default_status=(
            dg.DefaultSensorStatus.RUNNING
            if cfg.schedule.sensor_enabled
            else dg.DefaultSensorStatus.STOPPED
        ),
        description="Requests one reingest_job run per distinct change of the corpus files.",
    )
    def corpus_changed_sensor(
        context: dg.SensorEvaluationContext,
    ) -> dg.SensorResult:
        live = load_config(cfg.config_path) if cfg.config_path else cfg
        before: dict[str, Any] = json.loads(context.cursor) if context.cursor else {}
        after = corpus_state(live, before)
        if not context.cursor:
            # First look: remember the corpus; the nightly schedule covers what came before.
            return dg.SensorResult(
                skip_reason=f"baseline recorded ({len(after)} files watched)",
                cursor=json.dumps(after, sort_keys=True),
            )
        key, changed = change_key(before, after)
        if not changed:
            # Keep the refreshed cursor: touched-but-identical files are not re-hashed next tick.
            return dg.SensorResult(
                skip_reason=f"no corpus change ({len(after)} files watched)",
                cursor=json.dumps(after, sort_keys=True),
            )
        preview = ", ".join(changed[:5]) + (
            f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        )
        context.log.info(f"corpus changed: {preview}")
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(
                    run_key=key,
                    tags={"trigger": "corpus-change", "changed_files": str(len(changed))},
                )
            ],
            cursor=json.dumps(after, sort_keys=True),
        )

    return corpus_changed_sensor
