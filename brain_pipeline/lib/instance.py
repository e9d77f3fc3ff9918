"""The one Dagster instance folder shared by the CLI and the web UI.

Runs launched by `brain-pipeline materialize` must show up in the UI's run history, and
a later run must be able to read an earlier check's result, so both use the same
DAGSTER_HOME: the variable when set, otherwise a project-local folder created on first
use.

The instance's `dagster.yaml` carries what makes concurrent runs safe:

* `concurrency.runs.tag_concurrency_limits`: at most one in-progress run per build
  directory (`brain_pipeline/build_dir` tag, one slot per value) and per code location
  (`dagster/code_location`, which Dagster puts on every run it launches: one code
  location is one configuration, hence one build directory, and the UI's "Materialize"
  button cannot add our tag). Runs beyond the limit wait in the queue.
* `concurrency.pools`: Dagster 1.13's file has no per-pool limits, only a default for
  every pool without an explicit one; `default_limit: 1` gives `gemini_embedding` (the
  project's only pool) one slot, and `granularity: op` makes in-process CLI runs claim
  the slot too (with `run` only the queue would enforce it). `dagster instance
  concurrency set gemini_embedding N` overrides it for that pool.
* `run_monitoring`: lets the UI's daemon time out runs stuck in STARTING and free the
  pool slots of finished runs.

Creating the instance is serialised by a lock file in DAGSTER_HOME: two SQLite
instances initialised at once race on `CREATE TABLE alembic_version` and one crashes.

This module imports Dagster only inside the functions that need it, so commands that
merely point DAGSTER_HOME somewhere stay fast.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from brain_pipeline.state.lock import acquire_lock, make_holder
from brain_pipeline.utils.atomic import atomic_write_bytes

if TYPE_CHECKING:
    import dagster as dg

log = logging.getLogger(__name__)

BUILD_DIR_TAG = "brain_pipeline/build_dir"
PID_TAG = "brain_pipeline/pid"
HOST_TAG = "brain_pipeline/host"
CODE_LOCATION_TAG = "dagster/code_location"  # set by Dagster on every run it launches
GEMINI_POOL = "gemini_embedding"
INSTANCE_LOCK_NAME = ".brain-instance.lock"
# First-time storage creation takes a second or two; a minute covers a loaded machine.
INSTANCE_LOCK_WAIT_SECONDS = 120.0

_HEADER = "# Created by brain-pipeline on first use.\n"
_BASE_SETTINGS: dict[str, Any] = {
    "telemetry": {"enabled": False},
    "nux": {"enabled": False},
}
_RUN_TAG_LIMITS: list[dict[str, Any]] = [
    {"key": BUILD_DIR_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1},
    {"key": CODE_LOCATION_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1},
]
_POOL_SETTINGS: dict[str, Any] = {"default_limit": 1, "granularity": "op"}
_MONITORING: dict[str, Any] = {"enabled": True, "free_slots_after_run_end_seconds": 60}
CONCURRENCY_SETTINGS: dict[str, Any] = {
    "concurrency": {"runs": {"tag_concurrency_limits": _RUN_TAG_LIMITS}, "pools": _POOL_SETTINGS},
    "run_monitoring": _MONITORING,
}

# Block comments mirroring the module docstring, so the file explains itself.
_CONCURRENCY_COMMENT = """\
# Added by brain-pipeline: one in-progress run per build directory and per code
# location (others wait in the queue); one slot per concurrency pool without an
# explicit limit (the Gemini embedding pool, `gemini_embedding`); run monitoring frees
# the pool slots of finished runs.
"""


def _dump(data: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(data), sort_keys=False, default_flow_style=False)


INSTANCE_YAML = _HEADER + _dump(_BASE_SETTINGS) + _CONCURRENCY_COMMENT + _dump(CONCURRENCY_SETTINGS)


def _merge_tag_limits(existing: Any) -> tuple[list[Any], bool]:
    """Our limits appended to the user's list, unless the user already limits that key."""
    limits = list(existing) if isinstance(existing, list) else []
    keys = {entry.get("key") for entry in limits if isinstance(entry, dict)}
    missing = [dict(entry) for entry in _RUN_TAG_LIMITS if entry["key"] not in keys]
    return limits + missing, bool(missing)


def upgraded_instance_yaml(text: str | None) -> str | None:
    """The text `dagster.yaml` should hold, or None when `text` is already up to date.

    User keys are kept. When none of our top-level sections exists (a file written by an
    older brain-pipeline, or by hand) they are appended as text, comments intact;
    otherwise the missing leaves are merged in and the file is re-serialised. A user's
    own choices win: an existing pool default, tag limit on the same key, or legacy
    `run_queue`/`run_coordinator` settings (which Dagster refuses to combine with
    `concurrency.runs`) are left as they are.
    """
    if text is None or not text.strip():
        return INSTANCE_YAML
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        return None  # not ours to repair; Dagster will report it with the file name
    if not any(key in data for key in ("concurrency", "run_monitoring", "run_queue")):
        tail = "" if text.endswith("\n") else "\n"
        return text + tail + _CONCURRENCY_COMMENT + _dump(CONCURRENCY_SETTINGS)
    changed = False
    concurrency = data.setdefault("concurrency", {}) or {}
    data["concurrency"] = concurrency
    if "run_queue" in data or "run_coordinator" in data:
        # Legacy queue settings: Dagster refuses them beside `concurrency.runs` or
        # `concurrency.pools`, so the limits go where the user keeps theirs.
        queue = data.get("run_queue")
        if isinstance(queue, dict):
            limits, added = _merge_tag_limits(queue.get("tag_concurrency_limits"))
            if added:
                queue["tag_concurrency_limits"] = limits
                changed = True
        if not {"pools", "default_op_concurrency_limit"} & set(concurrency):
            concurrency["default_op_concurrency_limit"] = _POOL_SETTINGS["default_limit"]
            changed = True
    else:
        runs = concurrency.setdefault("runs", {}) or {}
        concurrency["runs"] = runs
        limits, added = _merge_tag_limits(runs.get("tag_concurrency_limits"))
        if added:
            runs["tag_concurrency_limits"] = limits
            changed = True
        if "default_op_concurrency_limit" not in concurrency:
            pools = concurrency.setdefault("pools", {}) or {}
            concurrency["pools"] = pools
            for key, value in _POOL_SETTINGS.items():
                if key not in pools:
                    pools[key] = value
                    changed = True
    monitoring = data.setdefault("run_monitoring", {}) or {}
    data["run_monitoring"] = monitoring
    for key, value in _MONITORING.items():
        if key not in monitoring:
            monitoring[key] = value
            changed = True
    if not concurrency:
        del data["concurrency"]
    return _HEADER + _dump(data) if changed else None


def _instance_lock(home: Path, what: str) -> Any:
    return acquire_lock(
        home / INSTANCE_LOCK_NAME,
        wait_seconds=INSTANCE_LOCK_WAIT_SECONDS,
        holder=make_holder(what),
    )


def _write_cli_run_settings(home: Path, settings_text: str) -> None:
    """Keep CLI_RUN_YAML in step with dagster.yaml (rewritten only when it differs)."""
    path = home / CLI_RUN_YAML
    wanted = cli_run_instance_yaml(settings_text)
    if wanted is None:
        path.unlink(missing_ok=True)
        return
    try:
        if path.read_text(encoding="utf-8") == wanted:
            return
    except FileNotFoundError:
        pass
    atomic_write_bytes(path, wanted.encode("utf-8"))


def ensure_instance_home(home: Path) -> Path:
    """Create or upgrade `home`/dagster.yaml (atomically, one process at a time), and
    point DAGSTER_HOME at `home`."""
    home = home.expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    settings = home / "dagster.yaml"
    with _instance_lock(home, "brain-pipeline: writing dagster.yaml"):
        try:
            current: str | None = settings.read_text(encoding="utf-8")
        except FileNotFoundError:
            current = None
        wanted = upgraded_instance_yaml(current)
        if wanted is not None:
            atomic_write_bytes(settings, wanted.encode("utf-8"))
        _write_cli_run_settings(home, wanted if wanted is not None else current or "")
    os.environ["DAGSTER_HOME"] = str(home)
    return home


#: What a run executed by the command line does without: its step logs are events in
#: the run's event log (the UI shows them) and its console lines go to the terminal, so
#: capturing the process's stdout/stderr into files as well only costs time. Dagster's
#: documented setting for "no compute-log capture".
CLI_RUN_OVERRIDES: dict[str, Any] = {
    "compute_logs": {
        "module": "dagster._core.storage.noop_compute_log_manager",
        "class": "NoOpComputeLogManager",
    }
}
CLI_RUN_YAML = "dagster-cli-run.yaml"
"""The instance settings of command-line runs: dagster.yaml plus CLI_RUN_OVERRIDES,
written beside it by `ensure_instance_home` (same storages, so the same instance)."""


def cli_run_instance_yaml(settings_text: str) -> str | None:
    """What CLI_RUN_YAML holds for a dagster.yaml holding `settings_text` (None for a file
    that is not a mapping: command-line runs then open dagster.yaml, and Dagster names
    what is wrong with it)."""
    try:
        data = yaml.safe_load(settings_text) or {}
    except yaml.YAMLError:
        return None
    if not isinstance(data, dict):
        return None
    data.update(CLI_RUN_OVERRIDES)
    header = "# Written by brain-pipeline from dagster.yaml for command-line runs; do not edit.\n"
    return header + _dump(data)


def open_instance(home: Path | None = None, *, cli_run: bool = False) -> dg.DagsterInstance:
    """`DagsterInstance.get()` for `home` (default: DAGSTER_HOME), created race-free.

    The first `get()` on a fresh folder creates the SQLite storages; done by two
    processes at once, one crashes with `table alembic_version already exists`. The
    instance lock makes the second wait for the first, then find the tables made.
    `cli_run`: the same storages through CLI_RUN_YAML (no compute-log capture).
    """
    import dagster as dg

    if home is not None:
        ensure_instance_home(home)
    raw = os.environ.get("DAGSTER_HOME", "").strip()
    if not raw:
        return dg.DagsterInstance.get()  # Dagster's own error names what is missing
    folder = Path(raw).expanduser().resolve()
    with _instance_lock(folder, "brain-pipeline: opening instance"):
        if cli_run and (folder / CLI_RUN_YAML).is_file():
            return dg.DagsterInstance.from_config(str(folder), config_filename=CLI_RUN_YAML)
        return dg.DagsterInstance.get()


# ---- run tags ---------------------------------------------------------------------------


def build_dir_tag_value(build_dir: Path | str) -> str:
    """The value of the build-directory tag: the absolute path, the same in every run."""
    return str(Path(build_dir).expanduser().resolve())


def in_process_run_tags(build_dir: Path | str | None) -> dict[str, str]:
    """Tags for a run executed in this process: who runs it (to tell a dead run from a
    live one later) and which build directory it writes (for the queue's limits)."""
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


def _run_process(instance: dg.DagsterInstance, run: Any) -> tuple[int | None, str | None]:
    """(pid, host) of the process executing `run`: our tags, else the run-start event."""
    from dagster import DagsterEventType

    tags = run.tags
    if PID_TAG in tags:
        try:
            return int(tags[PID_TAG]), tags.get(HOST_TAG)
        except ValueError:
            return None, None
    # Launched by Dagster (UI, schedule, sensor): the run worker logs its start event.
    # With SQLite storage and the default launcher the worker runs on this machine.
    for entry in instance.all_logs(run.run_id, of_type=DagsterEventType.RUN_START):
        event = entry.dagster_event
        if event is not None and event.pid is not None:
            return int(event.pid), None
    return None, None


def reap_dead_runs(
    instance: dg.DagsterInstance,
    *,
    host: str | None = None,
    started_at: Callable[[int], float | None] = process_started_at,
) -> list[ReapedRun]:
    """Mark in-progress runs whose process is gone as failed, and free pool slots held by
    runs that are over.

    A run killed with `kill -9` stays STARTED for ever: it would hold its slot in the
    `gemini_embedding` pool and its build directory's place in the run queue. Only runs
    whose process we can check are touched: tagged with this host (or untagged, with a
    run-start event from a local run worker) and whose pid is gone or now belongs to a
    process younger than the run.
    """
    from dagster import DagsterRunStatus, RunsFilter

    host = host or socket.gethostname()
    reaped: list[ReapedRun] = []
    in_progress = [
        DagsterRunStatus.STARTING,
        DagsterRunStatus.STARTED,
        DagsterRunStatus.CANCELING,
    ]
    for record in instance.get_run_records(filters=RunsFilter(statuses=in_progress)):
        run = record.dagster_run
        pid, run_host = _run_process(instance, run)
        if pid is None or (run_host is not None and run_host != host):
            continue
        begun = record.start_time or record.create_timestamp.timestamp()
        proc_start = started_at(pid)
        if proc_start is not None and proc_start <= begun + _PID_REUSE_MARGIN_SECONDS:
            continue  # still running
        where = f"pid {pid} on {run_host or host}"
        instance.report_run_failed(
            run,
            message=(
                f"The process running this run ({where}) is gone (killed or crashed); "
                "marked failed by brain-pipeline at start-up."
            ),
        )
        reaped.append(ReapedRun(run.run_id, pid, run_host or host, False))
    freed = free_slots_of_finished_runs(instance)
    return [ReapedRun(r.run_id, r.pid, r.host, r.run_id in freed) for r in reaped]


def free_slots_of_finished_runs(instance: dg.DagsterInstance) -> set[str]:
    """Free the concurrency slots still held by runs that are over (or unknown)."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return set()
    freed: set[str] = set()
    for run_id in storage.get_concurrency_run_ids():
        record = instance.get_run_record_by_id(run_id)
        if record is None or record.dagster_run.is_finished:
            storage.free_concurrency_slots_for_run(run_id)
            freed.add(run_id)
    return freed


def reaped_message(run: ReapedRun) -> str:
    """One line saying what reaping did to `run` (the CLI, the UI and the location)."""
    freed = " and freed its pool slots" if run.slots_freed else ""
    return (
        f"run {run.run_id} was left in progress by a process that is gone "
        f"(pid {run.pid} on {run.host}); marked it failed{freed}"
    )


