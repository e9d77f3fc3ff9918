"""Small helpers shared by the asset modules: metadata shaping, the build-dir binding."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import dagster as dg

from brain_pipeline.config import BrainConfig
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.records import AssetRecord, read_record
from brain_pipeline.utils.damage import log as _damage_log

# Run storage key-value entry naming the build directory this instance serves.
BUILD_DIR_KEY = "brain_pipeline/build_dir"

CORPUS = dg.AssetKey("corpus")
EVAL_FIXTURE = dg.AssetKey("eval_fixture")
DATA_VERSION_TAG = "dagster/data_version"
"""The tag an observation carries its data version in (Dagster's documented tag)."""
PUBLISH_ASSETS = frozenset({"published_local", "published_s3"})
"""The steps that write where the agent reads (their runs also lock the publish root)."""


class BuildDirMismatch(dg.Failure):
    """The instance serves another build directory: mixing them would mix their lineage."""


def layout_for(cfg: BrainConfig) -> StateLayout:
    return StateLayout.of(cfg.build_dir)


def claim_build_dir(instance: dg.DagsterInstance, build_dir: Path) -> None:
    """Bind the instance to one build directory, or refuse a run for another one.

    Everything a run hands on lives in the build directory, but Dagster's lineage,
    staleness and automation live in the instance: two build directories feeding one
    instance would make it show (and act on) a mix of both. The first run records its
    build directory; a later run with another one fails with a clear message.
    """
    wanted = str(build_dir)
    storage = instance.run_storage
    current = storage.get_cursor_values({BUILD_DIR_KEY}).get(BUILD_DIR_KEY)
    if current is None:
        storage.set_cursor_values({BUILD_DIR_KEY: wanted})
        return
    if current != wanted:
        raise BuildDirMismatch(
            description=(
                f"this Dagster instance serves the build directory {current}, not {wanted}: "
                "use one DAGSTER_HOME per build directory (set DAGSTER_HOME), or run "
                "`brain-pipeline materialize --rebind` to move this instance to the new one"
            )
        )


def start_step(instance: dg.DagsterInstance, settings: Any) -> tuple[BrainConfig, StateLayout]:
    """What every step does first: load the configuration and claim its build directory."""
    cfg: BrainConfig = settings.load()
    claim_build_dir(instance, cfg.build_dir)
    return cfg, layout_for(cfg)


def rebind_build_dir(instance: dg.DagsterInstance, build_dir: Path) -> str | None:
    """Point the instance at `build_dir`; returns the directory it served before."""
    storage = instance.run_storage
    before = storage.get_cursor_values({BUILD_DIR_KEY}).get(BUILD_DIR_KEY)
    storage.set_cursor_values({BUILD_DIR_KEY: str(build_dir)})
    return before


def upstream_record(layout: StateLayout, asset: str, needed_by: str) -> AssetRecord:
    """The upstream asset's record in the build directory, or a Failure saying what to run."""
    record = read_record(layout, asset)
    if record is None:
        raise dg.Failure(
            description=(
                f"{needed_by} needs {asset}, which has not been materialised in the build "
                f"directory {layout.build_dir}; materialise it first (e.g. --select "
                f"'{asset}+')"
            )
        )
    return record


def recheck_input(layout: StateLayout, asset: str, expected: str) -> None:
    """Fail when an input's record moved while this step worked (another writer)."""
    now = read_record(layout, asset)
    if now is None or now.data_version != expected:
        raise dg.Failure(
            description=(
                f"{asset} changed in {layout.build_dir} while this step was reading it "
                "(another run wrote it); nothing was recorded, run again"
            )
        )


def store_chunks(layout: StateLayout) -> Any:
    """The build's chunks through the one fast store reader (memoised per process)."""
    from brain_pipeline.corpus.store_reader import open_store_view

    return open_store_view(layout.store_file, layout).all_chunks()


def to_metadata(values: dict[str, Any]) -> dict[str, Any]:
    """Coerce plain values into Dagster metadata; numbers stay numeric so the UI plots them."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, bool):
            out[key] = dg.MetadataValue.bool(value)
        elif isinstance(value, int):
            out[key] = dg.MetadataValue.int(value)
        elif isinstance(value, float):
            out[key] = dg.MetadataValue.float(value)
        elif isinstance(value, dict | list):
            out[key] = dg.MetadataValue.json(value)
        elif value is None:
            out[key] = dg.MetadataValue.text("—")
        else:
            out[key] = dg.MetadataValue.text(str(value))
    return out


def table(
    columns: list[tuple[str, str]], rows: list[list[Any]], *, limit: int = 200
) -> dg.TableMetadataValue:
    """Table metadata with a schema ((name, type) pairs), at most `limit` rows."""
    schema = dg.TableSchema(columns=[dg.TableColumn(name, kind) for name, kind in columns])
    names = [name for name, _ in columns]
    records = [dg.TableRecord(dict(zip(names, row, strict=True))) for row in rows[:limit]]
    return dg.MetadataValue.table(records, schema=schema)


def latest_corpus_observation(instance: dg.DagsterInstance) -> tuple[str | None, str | None]:
    """(digest, run id) of the newest observation of `corpus` (any run or sensor)."""
    record = instance.get_latest_data_version_record(CORPUS, is_source=True)
    if record is None:
        return None, None
    # An observation carries its data version in Dagster's documented tag.
    tags = record.event_log_entry.tags or {}
    return tags.get(DATA_VERSION_TAG), record.run_id


class _DamageToRunLog(logging.Handler):
    """The core's damage WARN lines (`brain_pipeline.utils.damage`) in the current step's
    run log; outside a step, on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        try:
            context = dg.OpExecutionContext.get()
        except Exception:
            context = None
        if context is not None:
            context.log.warning(message)
        else:
            print(f"brain-pipeline: warning: {message}", file=sys.stderr)


def _forward_damage_reports() -> None:
    logger = logging.getLogger(_damage_log.name)
    if not any(isinstance(h, _DamageToRunLog) for h in logger.handlers):
        logger.addHandler(_DamageToRunLog(level=logging.WARNING))
        logger.propagate = True


_forward_damage_reports()
