"""Scale-out stays real: reingest_job under the multiprocess executor, storage in PostgreSQL.

What a production deployment changes is exactly this pair: every step in its own process
(Dagster's `multiprocess_executor`) and the instance's run, event-log and schedule
storage in PostgreSQL (`dagster-postgres`) instead of SQLite files. The graph must run
unchanged under both. So this test starts a real PostgreSQL server (the session fixture
below), writes a DAGSTER_HOME whose dagster.yaml points all storage at it, runs
`reingest_job` from the project's own Definitions with the executor swapped for the
multiprocess one, and checks

* that the steps really ran in separate processes (the pid Dagster stamps on every
  step's events: one per step, none of them this process),
* that the run and its events are rows in that PostgreSQL database,
* that the published knowledge store is byte-identical to the build's, and to the store
  an ordinary in-process run of the same job builds from the same corpus.

Only stable surfaces are used — the job name, `build_definitions(config_path)`, the
configuration file and the published files — so the test does not depend on how the
assets hand data to each other.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from brain_pipeline.definitions import build_definitions
from brain_pipeline_tests.peers.postgres import (
    PG_BIN_ENV,
    PostgresServer,
    PostgresUnavailable,
)

REPO = Path(__file__).resolve().parents[2]
SAMPLE_CORPUS = REPO / "examples" / "curated-content"
SAMPLE_FIXTURE = REPO / "examples" / "retrieval-eval.json"
JOB_NAME = "reingest_job"
STORE_FILENAME = "knowledge-store.json"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One real PostgreSQL cluster for the session (fails, never skips, when missing)."""
    with PostgresServer.running() as server:
        yield server


def reingest_job_multiprocess() -> dg.JobDefinition:
    """`reingest_job` from the project's Definitions, run by the multiprocess executor.

    Module-level so `dg.reconstructable` can rebuild it inside every step process; the
    configuration path travels in BRAIN_CONFIG, which the step processes inherit.
    """
    defs = build_definitions(os.environ["BRAIN_CONFIG"])
    job = defs.resolve_job_def(JOB_NAME)
    return job.with_executor_def(dg.multiprocess_executor)


def write_config(root: Path, corpus: Path) -> Path:
    """A corpus_config.yaml for one build: own build dir and publish root, no embeddings."""
    settings: dict[str, Any] = {
        "corpus": {"path": str(corpus), "candidates": []},
        "build_dir": str(root / "build"),
        "embedding": {"provider": "none"},
        "evaluation": {
            "fixture": str(SAMPLE_FIXTURE),
            # bm25 on the sample corpus scores nDCG@10 0.483 with 18 misses.
            "thresholds": {"bm25": {"min_ndcg_at_10": 0.4, "max_misses": 25}},
        },
        "publish": {"root": str(root / "agent")},
    }
    path = root / "corpus_config.yaml"
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return path


def write_instance_home(home: Path, server: PostgresServer, database: str) -> Path:
    """DAGSTER_HOME with run, event-log and schedule storage in the PostgreSQL database."""
    home.mkdir(parents=True)
    settings = {
        "storage": server.dagster_storage(database),
        "telemetry": {"enabled": False},
        "nux": {"enabled": False},
    }
    (home / "dagster.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    return home


def step_pids(instance: dg.DagsterInstance, run_id: str) -> dict[str, int]:
    """step key -> pid of the process that emitted its STEP_START event."""
    pids: dict[str, int] = {}
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START):
        event = entry.dagster_event
        assert event is not None and event.step_key is not None and event.pid is not None
        pids[event.step_key] = event.pid
    return pids


def step_failures(events: Sequence[dg.DagsterEvent]) -> list[str]:
    """`step: first line of its error` for each failed step, for the assertion message."""
    out = []
    for event in events:
        data = event.step_failure_data if event.is_step_failure else None
        if data is not None:
            message = data.error.message.strip().splitlines()[0] if data.error else "failed"
            out.append(f"{event.step_key}: {message}")
    return out


def test_reingest_job_runs_multiprocess_on_postgres(
    postgres_server: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE_CORPUS, corpus)

    # --- the scaled-out run: PostgreSQL storage, a process per step --------------------
    scaled = tmp_path / "scaled"
    scaled.mkdir()
    config = write_config(scaled, corpus)
    database = postgres_server.create_database("reingest_multiprocess")
    home = write_instance_home(tmp_path / "dagster_home", postgres_server, database)
    monkeypatch.setenv("BRAIN_CONFIG", str(config))
    monkeypatch.setenv("DAGSTER_HOME", str(home))

    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert type(instance.schedule_storage).__name__ == "PostgresScheduleStorage"
        result = dg.execute_job(
            dg.reconstructable(reingest_job_multiprocess),
            instance=instance,
            raise_on_error=False,
        )
        assert result.success, f"multiprocess run failed: {step_failures(result.all_events)}"
        run_id = result.run_id
        pids = step_pids(instance, run_id)
        run = instance.get_run_by_id(run_id)
        assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS

    # Every step ran in a process of its own, none of them this one.
    assert len(pids) >= 5, f"expected the whole graph's steps, got {sorted(pids)}"
    assert len(set(pids.values())) == len(pids), f"steps shared a process: {pids}"
    assert os.getpid() not in pids.values()

    # The run and its events are rows in the real server, not in files under DAGSTER_HOME.
    connection = postgres_server.connect(database)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT status FROM runs WHERE run_id = %s", (run_id,))
            assert cursor.fetchall() == [("SUCCESS",)]
            cursor.execute(
                "SELECT COUNT(*) FROM event_logs WHERE run_id = %s AND dagster_event_type = %s",
                (run_id, "STEP_SUCCESS"),
            )
            (step_successes,) = cursor.fetchone()
    finally:
        connection.close()
    assert step_successes == len(pids)
    assert not list(home.glob("**/*.db")), "storage fell back to SQLite files"

    built = (scaled / "build" / STORE_FILENAME).read_bytes()
    published = (scaled / "agent" / "src" / "storage" / STORE_FILENAME).read_bytes()
    assert built, "the build wrote an empty store"
    assert published == built

    # --- the reference: the same job in-process, on an ephemeral instance --------------
    reference = tmp_path / "in_process"
    reference.mkdir()
    reference_config = write_config(reference, corpus)
    monkeypatch.setenv("BRAIN_CONFIG", str(reference_config))
    job = build_definitions(str(reference_config)).resolve_job_def(JOB_NAME)
    with dg.DagsterInstance.ephemeral() as ephemeral:
        in_process = job.execute_in_process(instance=ephemeral, raise_on_error=False)
    assert in_process.success
    assert (reference / "build" / STORE_FILENAME).read_bytes() == built
    assert (reference / "agent" / "src" / "storage" / STORE_FILENAME).read_bytes() == published


def _multiprocess_run(home: Path) -> tuple[str, dict[str, int]]:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        result = dg.execute_job(
            dg.reconstructable(reingest_job_multiprocess), instance=instance, raise_on_error=False
        )
        assert result.success, f"multiprocess run failed: {step_failures(result.all_events)}"
        return result.run_id, step_pids(instance, result.run_id)


def _first_step_pid(home: Path, run_id: str) -> int:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        starts = list(instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START))
    first = min(starts, key=lambda entry: entry.timestamp).dagster_event
    assert first is not None and first.pid is not None
    return first.pid


def test_workers_share_one_instance_and_a_run_holds_the_lease_once(
    postgres_server: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41: under the multiprocess executor the ledger's run lease is taken once per
    run (by its first step process; the others find it theirs) and the up-to-date record
    is started once per run; a second worker with its own empty build directory on the
    SAME PostgreSQL instance and ledger is not refused, and takes the lease once the
    instance says the first run is over."""
    from brain_pipeline.config import load_config, memory_of
    from brain_pipeline.state.run_lease import lease_holder
    from brain_pipeline.steps import up_to_date

    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE_CORPUS, corpus)
    home = write_instance_home(
        tmp_path / "dagster_home", postgres_server, postgres_server.create_database("mp_inst")
    )
    ledger_db = postgres_server.create_database("mp_ledger")
    url = f"postgresql://{postgres_server.superuser}@{postgres_server.host}:{postgres_server.port}/{ledger_db}"
    monkeypatch.setenv("BRAIN_STATE_LEDGER", url)
    monkeypatch.setenv("DAGSTER_HOME", str(home))

    runs = []
    for worker in ("worker1", "worker2"):
        (tmp_path / worker).mkdir()
        monkeypatch.setenv("BRAIN_CONFIG", str(write_config(tmp_path / worker, corpus)))
        run_id, pids = _multiprocess_run(home)
        assert len(set(pids.values())) == len(pids) >= 5
        ledger = memory_of(load_config()).ledger
        holder = lease_holder(ledger)
        # Taken once, by the run's first step process; no later step wrote it again.
        assert holder is not None and holder["run_id"] == run_id, holder
        assert holder["pid"] == _first_step_pid(home, run_id)
        # The record's start is the run's, taken once (its inputs as the run started).
        assert up_to_date.pending_run(ledger) == run_id
        runs.append(run_id)
        assert (tmp_path / worker / "agent" / "src" / "storage" / STORE_FILENAME).is_file()
    assert runs[0] != runs[1]


def test_missing_server_binaries_fail_with_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without initdb/pg_ctl the peer refuses loudly (the fixture errors, it never skips)."""
    monkeypatch.setenv(PG_BIN_ENV, str(tmp_path))
    with pytest.raises(PostgresUnavailable, match="apt-get install .*postgresql"):
        PostgresServer.start()
