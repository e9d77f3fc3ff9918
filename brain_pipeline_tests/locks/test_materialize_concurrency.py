"""Two `brain-pipeline materialize` processes on one build directory: one writer at a time.

The test itself takes the build directory's lock first, so both commands are known to be
waiting (each says so on stderr) before either can start: no sleeps, no timing.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
import yaml

from brain_pipeline.corpus.store import parse_store
from brain_pipeline.lib.instance import BUILD_DIR_TAG, HOST_TAG, PID_TAG
from brain_pipeline.state.lock import acquire_lock, make_holder, publish_root_lock
from brain_pipeline_tests.peers.fake_gemini import FakeGemini
from brain_pipeline_tests.state.test_lock import ledger_lock_path

REPO = Path(__file__).resolve().parents[2]
SAMPLE_CORPUS = REPO / "examples" / "curated-content"
SAMPLE_FIXTURE = REPO / "examples" / "retrieval-eval.json"
API_KEY = "locks-test-key-51c0"


@dataclass
class Cli:
    root: Path
    build: Path
    home: Path
    env: dict[str, str]

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "brain_pipeline.cli", "materialize", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.root,
            env=self.env,
        )


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    config = {
        "corpus": {"path": str(SAMPLE_CORPUS), "candidates": []},
        "build_dir": str(tmp_path / "build"),
        "embedding": {"provider": "none", "dimension": 32},
        "evaluation": {
            "fixture": str(SAMPLE_FIXTURE),
            # Fake vectors carry no meaning: gate on BM25 only.
            "thresholds": {"bm25": {"min_ndcg_at_10": 0.2, "max_misses": 100}},
        },
        "publish": {"root": str(tmp_path / "agent")},
    }
    (tmp_path / "corpus_config.yaml").write_text(yaml.safe_dump(config))
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "BRAIN_CONFIG": str(tmp_path / "corpus_config.yaml"),
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
    }
    return Cli(tmp_path, tmp_path / "build", tmp_path / "dagster_home", env)


@pytest.fixture
def gemini(cli: Cli) -> Iterator[FakeGemini]:
    with FakeGemini(api_key=API_KEY) as server:
        cli.env.update(
            {
                "GEMINI_API_KEY": API_KEY,
                "GOOGLE_GEMINI_BASE_URL": server.url,
                "BRAIN_EMBEDDING_PROVIDER": "gemini",
            }
        )
        yield server


def _wait_for_line(proc: subprocess.Popen[str], marker: str) -> str:
    """Read stderr until a line containing `marker`; fail with what was said instead."""
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if marker in line:
            return line
    proc.wait()
    pytest.fail(f"exit {proc.returncode} without {marker!r}:\n{''.join(seen)[-3000:]}")


KINDS = pytest.mark.parametrize(
    "kind", [(), ("--select", "*")], ids=["everything", "selection"]
)


@KINDS
def test_a_run_that_cannot_wait_fails_naming_the_holder(cli: Cli, kind: tuple[str, ...]) -> None:
    cli.env["BRAIN_LOCK_WAIT_SECONDS"] = "0"
    with acquire_lock(
        ledger_lock_path(cli.build),
        wait_seconds=0,
        holder=make_holder("brain-pipeline materialize", "run-7f3e"),
    ):
        proc = cli.start(*kind)
        out, err = proc.communicate()
    assert proc.returncode == 75, err
    # The first line shows the resolved inputs (preflight); the refusal is one more line.
    header, *lines = [line for line in err.splitlines() if line.strip()]
    assert header.startswith("brain-pipeline materialize: corpus "), err
    assert len(lines) == 1, err
    assert lines[0].startswith(f"brain-pipeline materialize: the ledger sqlite:///{cli.build}")
    assert f"held by pid {os.getpid()} on host {socket.gethostname()}" in lines[0]
    assert "run run-7f3e" in lines[0] and "since 20" in lines[0]
    assert not (cli.build / "knowledge-store.json").exists()  # nothing ran
    assert not dg.DagsterInstance.from_config(str(cli.home)).get_runs()


@KINDS
def test_two_runs_on_one_build_dir_take_turns_and_embed_nothing_twice(
    cli: Cli, gemini: FakeGemini, kind: tuple[str, ...]
) -> None:
    with acquire_lock(
        ledger_lock_path(cli.build), wait_seconds=0, holder=make_holder("test", "run-gate")
    ):
        first, second = cli.start(*kind), cli.start(*kind)
        for proc in (first, second):
            line = _wait_for_line(proc, f"waiting up to 600s for the ledger {cli.build}")
            assert f"pid {os.getpid()}" in line and "run run-gate" in line
    results = [proc.communicate() for proc in (first, second)]
    for proc, (_out, err) in zip((first, second), results, strict=True):
        assert proc.returncode == 0, _out[-3000:] + err[-3000:]

    chunks = parse_store((cli.build / "knowledge-store.json").read_bytes())
    # Each chunk's vector was paid for once: the run that went second found them built.
    assert gemini.stats().task_types.get("RETRIEVAL_DOCUMENT") == len(chunks)
    runs = dg.DagsterInstance.from_config(str(cli.home)).get_runs()
    assert [r.status for r in runs] == [dg.DagsterRunStatus.SUCCESS] * 2
    for run in runs:
        assert run.tags[BUILD_DIR_TAG] == str(cli.build.resolve())
        assert run.tags[HOST_TAG] == socket.gethostname()
        assert int(run.tags[PID_TAG]) in (first.pid, second.pid)
    # The runs did not overlap: one ended before the other started.
    records = sorted(
        dg.DagsterInstance.from_config(str(cli.home)).get_run_records(),
        key=lambda r: r.start_time or 0.0,
    )
    assert records[0].end_time is not None and records[1].start_time is not None
    assert records[0].end_time <= records[1].start_time


def test_the_publish_root_is_locked_only_by_runs_that_publish(cli: Cli) -> None:
    cli.env["BRAIN_LOCK_WAIT_SECONDS"] = "0"
    publish_root = cli.root / "agent"
    holder = make_holder("publisher", "run-pub")
    with publish_root_lock(publish_root, wait_seconds=0, holder=holder):
        ingest = cli.start("--select", "group:ingest")
        _out, err = ingest.communicate()
        assert ingest.returncode == 0, err[-3000:]  # builds while someone publishes
        everything = cli.start()
        _out, err = everything.communicate()
    assert everything.returncode == 75, err[-3000:]
    assert f"publish root {publish_root.resolve()} is busy" in err
    assert "run run-pub" in err
    assert not (publish_root / "src").exists()
    # Its ledger lock was let go on the way out: the next run gets both.
    with acquire_lock(ledger_lock_path(cli.build), wait_seconds=0, holder=make_holder("probe")):
        pass
