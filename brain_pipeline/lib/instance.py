"""The one Dagster instance folder shared by the CLI and the web UI.

Runs launched by `brain-pipeline materialize` must show up in the UI's run history, and
a later run must be able to read an earlier check's result, so both use the same
DAGSTER_HOME: the variable when set, otherwise a project-local folder.

The instance is the user's. An existing `dagster.yaml` is never written, whatever it
holds (a legacy `run_coordinator`, comments, other code locations' limits). Only a
folder that does not exist yet is created, with a `dagster.yaml` of ours (telemetry and
the first-visit dialog off; at most one queued run per build directory, by our own tag,
so no other code location is limited; run monitoring, which frees the pool slots of
finished runs): the folder and its file appear together (built beside, then renamed),
so nobody ever sees the one without the other.

What the project needs from any instance is applied without touching anyone else's:

* One writer per ledger: the ledger's run lease (`state.run_lease`), held by every
  run whoever launched it, for the run (`run_is_over` tells a waiter it is over).
* The `gemini_embedding` pool: when that pool has no limit (neither its own nor a
  `concurrency.pools.default_limit`), it gets one slot for that pool only, exactly what
  `dagster instance concurrency set gemini_embedding 1` does; a limit already there is
  left alone (`ensure_pool_limit`).

Opening the instance is serialised by a lock that lives with the build directory
(`state/locks/instance.lock`), never in DAGSTER_HOME (which may be read-only): two
SQLite instances initialised at once race on `CREATE TABLE alembic_version` and one
crashes. Command-line runs open the same storages without compute-log capture through
Dagster's own overrides, so nothing is written into DAGSTER_HOME for that either.

This module imports Dagster only inside the functions that need it, so commands that
merely point DAGSTER_HOME somewhere stay fast.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.lock import acquire_lock, make_holder

if TYPE_CHECKING:
    import dagster as dg

log = logging.getLogger(__name__)

BUILD_DIR_TAG = "brain_pipeline/build_dir"
PID_TAG = "brain_pipeline/pid"
HOST_TAG = "brain_pipeline/host"
GEMINI_POOL = "gemini_embedding"
GEMINI_POOL_LIMIT = 1
INSTANCE_LOCK_NAME = "instance.lock"
# First-time storage creation takes a second or two; a minute covers a loaded machine.
INSTANCE_LOCK_WAIT_SECONDS = 120.0

_HEADER = "# Created by brain-pipeline with this folder; yours to edit, never rewritten.\n"
_BASE_SETTINGS: dict[str, Any] = {
    "telemetry": {"enabled": False},
    "nux": {"enabled": False},
}
_OWN_SETTINGS: dict[str, Any] = {
    "concurrency": {
        "runs": {
            "tag_concurrency_limits": [
                {"key": BUILD_DIR_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
            ]
        }
    },
    "run_monitoring": {"enabled": True, "free_slots_after_run_end_seconds": 60},
}
_OWN_COMMENT = """\
# One queued run at a time per build directory (runs carry the brain_pipeline/build_dir
# tag; other code locations' runs do not, so they are not limited); run monitoring frees
# the pool slots of finished runs. The gemini_embedding pool's limit is kept in the
# instance's storage (dagster instance concurrency set gemini_embedding N).
"""


def _dump(data: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(data), sort_keys=False, default_flow_style=False)


INSTANCE_YAML = _HEADER + _dump(_BASE_SETTINGS) + _OWN_COMMENT + _dump(_OWN_SETTINGS)
"""The `dagster.yaml` of an instance folder brain-pipeline creates (and only then)."""


def ensure_instance_home(home: Path) -> Path:
    """Point DAGSTER_HOME at `home`; create the folder, with INSTANCE_YAML, only when it
    does not exist. An existing folder (and its dagster.yaml, or its lack of one) is the
    user's and is not written."""
    home = home.expanduser().resolve()
    if not home.exists():
        _create_home(home)
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def _create_home(home: Path) -> None:
    """The folder and its dagster.yaml at once: built under a temporary name beside it,
    then renamed. A process that loses the race finds the winner's folder, complete."""
    home.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{home.name}.", dir=home.parent))
    try:
        (staging / "dagster.yaml").write_text(INSTANCE_YAML, encoding="utf-8")
        mask = os.umask(0)  # read it (there is no other way), then put it back
        os.umask(mask)
        staging.chmod(0o777 & ~mask)  # as mkdir would have made it (mkdtemp makes 0700)
        try:
            staging.rename(home)
        except OSError:
            if not home.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def instance_lock_path(build_dir: Path | str) -> Path:
    """The lock serialising instance creation: with the build directory (DAGSTER_HOME may
    be read-only), beside the build directory's own write lock."""
    return StateLayout.of(build_dir).locks_dir / INSTANCE_LOCK_NAME


#: What a run executed by the command line does without: its step logs are events in
#: the run's event log (the UI shows them) and its console lines go to the terminal, so
#: capturing the process's stdout/stderr into files as well only costs time. Dagster's
#: documented setting for "no compute-log capture", applied as an override when the
#: instance is opened (dagster.yaml is not touched).
CLI_RUN_OVERRIDES: dict[str, Any] = {
    "compute_logs": {
        "module": "dagster._core.storage.noop_compute_log_manager",
        "class": "NoOpComputeLogManager",
    }
}


def open_instance(build_dir: Path | str, *, cli_run: bool = False) -> dg.DagsterInstance:
    """The instance of DAGSTER_HOME, created race-free.

    The first open of a fresh folder creates the SQLite storages; done by two processes
    at once, one crashes with `table alembic_version already exists`. The lock (kept
    with `build_dir`) makes the second wait for the first, then find the tables made.
    `cli_run`: the same dagster.yaml and storages, without compute-log capture
    (CLI_RUN_OVERRIDES, through the public `DagsterInstance.local_temp(tempdir, overrides)`,
    which reads `tempdir`/dagster.yaml exactly as `DagsterInstance.get()` reads
    DAGSTER_HOME's; pinned by `test_command_line_runs_share_the_storages_...`).
    """
    import dagster as dg

    raw = os.environ.get("DAGSTER_HOME", "").strip()
    if not raw:
        return dg.DagsterInstance.get()  # Dagster's own error names what is missing
    folder = Path(raw).expanduser().resolve()
    with acquire_lock(
        instance_lock_path(build_dir),
        wait_seconds=INSTANCE_LOCK_WAIT_SECONDS,
        holder=make_holder("brain-pipeline: opening the Dagster instance"),
    ):
        if cli_run and folder.is_dir():
            return dg.DagsterInstance.local_temp(tempdir=str(folder), overrides=CLI_RUN_OVERRIDES)
        return dg.DagsterInstance.get()


def ensure_pool_limit(instance: dg.DagsterInstance) -> str | None:
    """Give the `gemini_embedding` pool one slot when nothing limits it yet; returns the
    line saying so (None when a limit was already there, or the storage has no pools).

    Only that pool's own limit is set, as `dagster instance concurrency set
    gemini_embedding 1` would: no default for other pools, nothing in dagster.yaml.
    """
    from brain_pipeline.lib.dagster_private import pool_limit, set_pool_limit

    if pool_limit(instance, GEMINI_POOL) is not None:
        return None
    if not set_pool_limit(instance, GEMINI_POOL, GEMINI_POOL_LIMIT):
        return None
    return (
        f"the {GEMINI_POOL} pool had no limit in this instance: set it to "
        f"{GEMINI_POOL_LIMIT} (change it with `dagster instance concurrency set "
        f"{GEMINI_POOL} N`)"
    )


# ---- run tags ---------------------------------------------------------------------------


def build_dir_tag_value(build_dir: Path | str) -> str:
    """The value of the build-directory tag: the absolute path, the same in every run."""
    return str(Path(build_dir).expanduser().resolve())


def in_process_run_tags(build_dir: Path | str | None) -> dict[str, str]:
    """Tags for a run executed in this process: who runs it (to tell a dead run from a
    live one later) and which build directory it writes (which run it was, in the UI)."""
    tags = {PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}
    if build_dir is not None:
        tags[BUILD_DIR_TAG] = build_dir_tag_value(build_dir)
    return tags


# ---- dead runs ----------------------------------------------------------------------------


def process_started_at(pid: int) -> float | None:
    """When process `pid` started (epoch seconds), or None when it no longer runs.

    A zombie (killed, not yet reaped by its parent) counts as gone. Where /proc is not
    available, a process that exists is reported as started at 0 (always old enough).
    """
    if pid <= 0:
        return None
    stat = Path(f"/proc/{pid}/stat")
    try:
        fields = stat.read_text(encoding="ascii", errors="replace").rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return None
    except OSError:
        fields = []
    if not fields:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return 0.0
        return 0.0
    if fields[0] in ("Z", "X"):
        return None
    ticks = int(fields[19])  # field 22 of stat: start time in clock ticks after boot
    return _boot_time() + ticks / os.sysconf("SC_CLK_TCK")


def _boot_time() -> float:
    for line in Path("/proc/stat").read_text(encoding="ascii").splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return 0.0  # pragma: no cover - every Linux /proc/stat has btime


@dataclass(frozen=True)
class ReapedRun:
    run_id: str
    pid: int
    host: str
    slots_freed: bool


# A process that started after the run it supposedly runs is a reused pid. The margin
# covers /proc's one-second boot time resolution.
_PID_REUSE_MARGIN_SECONDS = 2.0


def _run_process(instance: dg.DagsterInstance, record: Any) -> tuple[int | None, str | None]:
    """(pid, host) of the process executing a run: our tags, else its run-start event."""
    import dagster as dg

    run = record.dagster_run
    tags = run.tags
    if PID_TAG in tags:
        try:
            return int(tags[PID_TAG]), tags.get(HOST_TAG)
        except ValueError:
            return None, None
    # Launched by Dagster (UI, schedule, sensor): the run worker logs its start event.
    # With SQLite storage and the default launcher the worker runs on this machine. The
    # public run-status feed is read from the run's creation on, oldest first: its start
    # event is among the first few.
    created = record.create_timestamp.timestamp()
    changes = instance.fetch_run_status_changes(
        dg.RunStatusChangeRecordsFilter(
            event_type=dg.DagsterEventType.RUN_START, after_timestamp=created - 1.0
        ),
        limit=_RUN_START_SCAN,
        ascending=True,
    )
    for entry in changes.records:
        event = entry.event_log_entry.dagster_event
        if entry.run_id == run.run_id and event is not None and event.pid is not None:
            return int(event.pid), None
    return None, None


# Run starts read after a run's creation to find its own (other runs start in between).
_RUN_START_SCAN = 200


def reap_dead_runs(
    instance: dg.DagsterInstance,
    *,
    host: str | None = None,
    started_at: Callable[[int], float | None] = process_started_at,
) -> list[ReapedRun]:
    """Mark in-progress runs whose process is gone as failed, and free pool slots held by
    runs that are over.

    A run killed with `kill -9` stays STARTED for ever: it would hold its slot in the
    `gemini_embedding` pool, and read as in progress for ever. Only runs
    whose process we can check are touched: tagged with this host (or untagged, with a
    run-start event from a local run worker) and whose pid is gone or now belongs to a
    process younger than the run.
    """
    from dagster import DagsterRunStatus, RunsFilter

    from brain_pipeline.lib.dagster_private import mark_run_failed

    host = host or socket.gethostname()
    reaped: list[ReapedRun] = []
    in_progress = [
        DagsterRunStatus.STARTING,
        DagsterRunStatus.STARTED,
        DagsterRunStatus.CANCELING,
    ]
    for record in instance.get_run_records(filters=RunsFilter(statuses=in_progress)):
        run = record.dagster_run
        pid, run_host = _run_process(instance, record)
        if pid is None or (run_host is not None and run_host != host):
            continue
        begun = record.start_time or record.create_timestamp.timestamp()
        proc_start = started_at(pid)
        if proc_start is not None and proc_start <= begun + _PID_REUSE_MARGIN_SECONDS:
            continue  # still running
        where = f"pid {pid} on {run_host or host}"
        mark_run_failed(
            instance,
            run,
            f"The process running this run ({where}) is gone (killed or crashed); "
            "marked failed by brain-pipeline at start-up.",
        )
        reaped.append(ReapedRun(run.run_id, pid, run_host or host, False))
    freed = free_slots_of_finished_runs(instance)
    return [ReapedRun(r.run_id, r.pid, r.host, r.run_id in freed) for r in reaped]


def free_slots_of_finished_runs(instance: dg.DagsterInstance) -> set[str]:
    """Free the concurrency slots still held by runs that are over (or unknown)."""
    from brain_pipeline.lib.dagster_private import free_pool_slots, runs_holding_pool_slots

    freed: set[str] = set()
    for run_id in runs_holding_pool_slots(instance):
        record = instance.get_run_record_by_id(run_id)
        if record is None or record.dagster_run.is_finished:
            free_pool_slots(instance, run_id)
            freed.add(run_id)
    return freed


def reaped_message(run: ReapedRun) -> str:
    """One line saying what reaping did to `run` (the CLI, the UI and the location)."""
    freed = " and freed its pool slots" if run.slots_freed else ""
    return (
        f"run {run.run_id} was left in progress by a process that is gone "
        f"(pid {run.pid} on {run.host}); marked it failed{freed}"
    )


def run_is_over(instance: dg.DagsterInstance) -> Callable[[str], bool]:
    """Whether a run holding the ledger's run lease is over, as this instance says: the
    stale check of `state.run_lease` (a run whose process is gone is reaped first). A
    run this instance does not know may be another instance's: not over."""

    def over(run_id: str) -> bool:
        record = instance.get_run_record_by_id(run_id)
        if record is None or record.dagster_run.is_finished:
            return record is not None
        reap_dead_runs(instance)
        record = instance.get_run_record_by_id(run_id)
        return record is not None and record.dagster_run.is_finished

    return over
