"""Small helpers shared by the asset modules: metadata shaping, the build-dir binding."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg

from brain_pipeline.config import BrainConfig
from brain_pipeline.lib.dagster_private import (
    current_step_log,
    observed_data_version,
    read_instance_value,
    write_instance_value,
)
from brain_pipeline.steps.contract import StepFailure
from brain_pipeline.steps.report import CheckVerdict, Markdown, RunLink, StepResult, Table
from brain_pipeline.utils.damage import log as _damage_log
from brain_pipeline.utils.damage import print_report
from brain_pipeline.utils.markdown import md_defanged

# Run storage key-value entry naming the ledger this instance serves (before issue 41: the
# build directory, whose SQLite ledger it now is).
BUILD_DIR_KEY = "brain_pipeline/build_dir"

CORPUS = dg.AssetKey("corpus")
EVAL_FIXTURE = dg.AssetKey("eval_fixture")
PUBLISH_ASSETS = frozenset({"published_local", "published_s3"})
"""The steps that write where the agent reads (their runs also lock the publish root)."""


class BuildDirMismatch(dg.Failure):
    """The instance serves another ledger: mixing them would mix two projects' lineage."""


def ledger_identity(cfg: BrainConfig) -> str:
    """What an instance is bound to: the ledger's URL, without a password."""
    from brain_pipeline.state.ledger import redacted

    return redacted(cfg.ledger_url())


def claim_build_dir(instance: dg.DagsterInstance, cfg: BrainConfig) -> None:
    """Bind the instance to one ledger, or refuse a run for another one.

    What a run remembers lives in the ledger, but Dagster's lineage, staleness and
    automation live in the instance: two projects' ledgers feeding one instance would
    make it show (and act on) a mix of both. The first run records its ledger; a later
    run with another one fails with a clear message. Workers with build directories of
    their own on one shared ledger (`state.ledger` on PostgreSQL) share the instance
    too. An instance bound by an older version to this build directory is moved to its
    ledger, which is that build directory's.
    """
    wanted = ledger_identity(cfg)
    current = read_instance_value(instance, BUILD_DIR_KEY)
    if current is None or (current == str(cfg.build_dir) and not cfg.state.ledger):
        write_instance_value(instance, BUILD_DIR_KEY, wanted)
        return
    if current != wanted:
        raise BuildDirMismatch(
            description=(
                f"this Dagster instance serves the ledger {current}, not {wanted} (the "
                "build directory's own, or state.ledger): use one DAGSTER_HOME per "
                "project (set DAGSTER_HOME), or run `brain-pipeline materialize --rebind` "
                "to move this instance to the new one"
            )
        )


def start_step(
    instance: dg.DagsterInstance, settings: Any, run: dg.DagsterRun | None = None
) -> BrainConfig:
    """What every step does first: take the run's configuration (read once when the run
    started, defs/resources.py), check the run's inputs (`run` given) and claim its
    ledger. The steps take their paths from it (`memory_of(cfg).layout`)."""
    cfg: BrainConfig = settings.load()
    if run is not None:
        preflight_run(run, cfg)
    claim_build_dir(instance, cfg)
    return cfg


def run_asset_names(run: dg.DagsterRun | None) -> list[str] | None:
    """The asset names a run selects; None when it names none (a job: every asset)."""
    keys = run.asset_selection if run is not None else None
    return sorted(key.to_user_string() for key in keys) if keys else None


def preflight_run(run: dg.DagsterRun | None, cfg: BrainConfig) -> None:
    """The command line's preflight, for runs Dagster launches (UI, schedule, automation):
    the first step of such a run fails with the same one line `materialize` prints,
    before anything is embedded or published. Cheap (a few directory listings and the
    fixture's parse), so every step may call it."""
    from brain_pipeline.preflight import Needs, check_inputs

    problems = check_inputs(cfg, Needs.for_assets(run_asset_names(run)))
    if problems:
        raise dg.Failure(description="; ".join(p.message for p in problems))


def rebind_build_dir(instance: dg.DagsterInstance, cfg: BrainConfig) -> str | None:
    """Point the instance at `cfg`'s ledger; returns the ledger it served before."""
    before = read_instance_value(instance, BUILD_DIR_KEY)
    write_instance_value(instance, BUILD_DIR_KEY, ledger_identity(cfg))
    return before


@contextmanager
def step_failures() -> Iterator[None]:
    """Show a core step's refusal as the step's failure description (no traceback noise)."""
    try:
        yield
    except StepFailure as exc:
        raise dg.Failure(description=str(exc), metadata=to_metadata(exc.metadata)) from None


def to_metadata(values: dict[str, Any]) -> dict[str, Any]:
    """Plain step values as Dagster metadata; numbers stay numeric so the UI plots them.

    Tables (`steps.report.Table` or a pandas DataFrame) get a schema, `Markdown` renders,
    a `RunLink` links to the run, and None shows as a dash.
    """
    out: dict[str, Any] = {}
    for key, value in values.items():
        out[key] = _metadata_value(value)
    return out


def _metadata_value(value: Any) -> Any:
    if isinstance(value, bool):
        return dg.MetadataValue.bool(value)
    if isinstance(value, int):
        return dg.MetadataValue.int(value)
    if isinstance(value, float):
        return dg.MetadataValue.float(value)
    if isinstance(value, Table):
        return table(value.columns, value.rows)
    if isinstance(value, Markdown):
        return dg.MetadataValue.md(value.text)
    if isinstance(value, RunLink):
        return dg.MetadataValue.dagster_run(value.run_id)
    if hasattr(value, "dtypes") and hasattr(value, "itertuples"):
        from brain_pipeline.lib.tables import frame_table

        return frame_table(value)
    if isinstance(value, dict | list):
        return dg.MetadataValue.json(value)
    if value is None:
        return dg.MetadataValue.text("—")
    return dg.MetadataValue.text(str(value))


def table(
    columns: list[tuple[str, str]], rows: list[list[Any]], *, limit: int = 200
) -> dg.TableMetadataValue:
    """Table metadata with a schema ((name, type) pairs), at most `limit` rows."""
    schema = dg.TableSchema(columns=[dg.TableColumn(name, kind) for name, kind in columns])
    names = [name for name, _ in columns]
    records = [dg.TableRecord(dict(zip(names, row, strict=True))) for row in rows[:limit]]
    return dg.MetadataValue.table(records, schema=schema)


def materialize_result(
    result: StepResult, checks: list[dg.AssetCheckResult] | None = None
) -> dg.MaterializeResult:
    """The step's materialisation, with the results of the checks its step evaluates;
    its value, the record the step kept, is what the hand-off (`defs.hand_off`) gives
    the next step."""
    return dg.MaterializeResult(
        metadata=to_metadata(result.metadata),
        data_version=dg.DataVersion(result.data_version),
        check_results=checks or None,
        value=result.record,
    )


def latest_corpus_observation(instance: dg.DagsterInstance) -> tuple[str | None, str | None]:
    """(digest, run id) of the newest observation of `corpus` (any run or sensor)."""
    result = instance.fetch_observations(dg.AssetRecordsFilter(asset_key=CORPUS), limit=1)
    if not result.records:
        return None, None
    record = result.records[0]
    return observed_data_version(record), record.run_id


def check_result(verdict: CheckVerdict, check_name: str | None = None) -> dg.AssetCheckResult:
    """`verdict` as Dagster's result (`check_name` for a check evaluated in its asset's step)."""
    return dg.AssetCheckResult(
        check_name=check_name,
        passed=verdict.passed,
        severity=dg.AssetCheckSeverity[verdict.severity],
        # rendered as Markdown by the UI: corpus and fixture text in it must stay text
        description=md_defanged(verdict.description),
        metadata=to_metadata(verdict.metadata),
    )


class _DamageToRunLog(logging.Handler):
    """The core's damage WARN lines (`brain_pipeline.utils.damage`) in the current step's
    run log; outside a step, on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        log = current_step_log()
        if log is not None:
            log.warning(message)
        else:
            print_report(message)


def _forward_damage_reports() -> None:
    logger = logging.getLogger(_damage_log.name)
    if not any(isinstance(h, _DamageToRunLog) for h in logger.handlers):
        logger.addHandler(_DamageToRunLog(level=logging.WARNING))
        logger.propagate = True


_forward_damage_reports()
