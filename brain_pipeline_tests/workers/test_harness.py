"""The fresh-worker harness itself (harness.py), proven against the real peers, so a
scenario that fails in test_fresh_workers.py fails because of the pipeline, not the set-up."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from brain_pipeline.corpus.store import parse_store
from brain_pipeline_tests.workers.harness import (
    API_KEY,
    PUBLISH_PREFIX,
    STORE_FILENAME,
    Cluster,
    communicate_all,
    kill_group,
    sha256,
    wait_until,
)


def test_workers_share_the_servers_and_nothing_on_disk(cluster: Cluster) -> None:
    a, b = cluster.worker("a"), cluster.worker("b")
    env_a, env_b = a.env(), b.env()
    for name in ("BRAIN_BUILD_DIR", "DAGSTER_HOME", "TMPDIR"):
        assert env_a[name] != env_b[name]
        assert env_a[name].startswith(str(a.folder)) and env_b[name].startswith(str(b.folder))
    assert env_a["BRAIN_CONFIG"] == env_b["BRAIN_CONFIG"] == str(cluster.config)
    assert not cluster.config.is_relative_to(a.folder)
    state = yaml.safe_load(cluster.config.read_text(encoding="utf-8"))["state"]
    assert state == {"ledger": cluster.ledger_url, "blobs": "s3://brain-state/state"}
    assert cluster.ledger_url.startswith("postgresql://") and "@" in cluster.ledger_url
    for worker in (a, b):
        instance = yaml.safe_load((worker.home / "dagster.yaml").read_text(encoding="utf-8"))
        db = instance["storage"]["postgres"]["postgres_db"]
        assert db["db_name"] == cluster.dagster_db and db["scheme"] == "postgresql+psycopg2"
        assert not (worker.build_dir.exists() and any(worker.build_dir.iterdir()))


def test_a_worker_runs_in_its_own_process_on_the_shared_instance(cluster: Cluster) -> None:
    a = cluster.worker("a")
    outcome = a.materialize()
    assert outcome.code == 0, outcome.explain()
    assert outcome.line("succeeded: run ").startswith("succeeded: run ")
    live = cluster.live_store()
    assert live is not None
    # Every chunk text of a first build paid once, as the fake service counted it; the
    # evaluation's queries counted apart.
    stats = cluster.gemini.stats()
    assert outcome.texts == len(parse_store(live)) == cluster.texts_embedded() > 0
    assert outcome.queries == cluster.queries_embedded() > 0
    assert outcome.texts + outcome.queries == stats.texts
    # Published to the folder and to the bucket, the same bytes.
    assert cluster.s3_store_sha256() == sha256(live)
    assert f"{PUBLISH_PREFIX}{STORE_FILENAME}" in cluster.s3_keys()
    assert f"src/storage/{STORE_FILENAME}" in cluster.published()
    # The run is a row in the shared PostgreSQL instance, not a SQLite file of the worker.
    connection = cluster.postgres.connect(cluster.dagster_db)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT status FROM runs")
            assert cursor.fetchall() == [("SUCCESS",)]
    finally:
        connection.close()
    assert not list(a.home.rglob("*.db"))
    assert a.build_dir.is_dir()  # the worker's own, inside its folder


def test_a_started_worker_is_killed_with_its_children(cluster: Cluster) -> None:
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = cluster.worker("a").start(argv=[sys.executable, "-c", script])
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    kill_group(proc)
    assert proc.returncode == -9
    # The grandchild is not ours to wait for: it is gone (or a zombie) once killed.
    status = Path(f"/proc/{child}/status")
    wait_until(lambda: not status.exists() or "State:\tZ" in status.read_text(), timeout=10)


def test_a_worker_talks_to_the_fake_service_only(cluster: Cluster) -> None:
    env = cluster.worker("a").env()
    assert env["GEMINI_API_KEY"] == API_KEY
    assert env["GOOGLE_GEMINI_BASE_URL"] == cluster.gemini.url
    assert env["AWS_ENDPOINT_URL_S3"] == cluster.s3.endpoint_url


def test_processes_started_together_are_read_together(cluster: Cluster) -> None:
    """Each writes more than a pipe holds, then waits for the other's file: read one at a
    time, the first would block on its full pipe and the second would wait forever."""
    script = (
        "import pathlib, sys, time\n"
        "me, other = sys.argv[1:]\n"
        "sys.stderr.write('x' * 200_000); sys.stderr.flush()\n"
        "pathlib.Path(me).touch()\n"
        "deadline = time.monotonic() + 60\n"
        "while not pathlib.Path(other).exists():\n"
        "    assert time.monotonic() < deadline, 'the other never got past its pipe'\n"
        "    time.sleep(0.01)\n"
    )
    marks = [str(cluster.root / name) for name in ("a.done", "b.done")]
    procs = {
        "a": cluster.worker("a").start(argv=[sys.executable, "-c", script, *marks]),
        "b": cluster.worker("b").start(argv=[sys.executable, "-c", script, *marks[::-1]]),
    }
    done = communicate_all(procs, timeout=120)
    assert {name: (code, len(err)) for name, (code, _, err) in done.items()} == {
        "a": (0, 200_000),
        "b": (0, 200_000),
    }
