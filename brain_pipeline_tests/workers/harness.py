"""Fresh workers as an operator runs them: separate processes, each with its own folder.

A `Cluster` is what the workers share and nothing more: one PostgreSQL server holding
the Dagster instance's storage (database `dagster`) and the ledger (database `ledger`),
one moto S3 server with a bucket for the blobs (`s3://brain-state/state`) and one the
pipeline publishes to, the fake Gemini server (it counts the texts embedded), a corpus,
and a configuration file outside any worker's folder (`BRAIN_CONFIG`). The agent's
publish root is shared too (the mounted folder the agent reads).

A `Worker` is a folder holding an empty build directory, its own `DAGSTER_HOME` (a
`dagster.yaml` putting run, event-log and schedule storage on that PostgreSQL) and its
own temporary folder; every command runs as a separate process (`python -m
brain_pipeline.cli ...`) with the folder as its working directory. What a command
returns is what a user sees: the exit code, stdout and stderr, and the texts the
embedding service was paid for while it ran (the fake server's count, before and after).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import yaml

from brain_pipeline_tests.peers.fake_gemini import FakeGemini
from brain_pipeline_tests.peers.moto_s3 import (
    TEST_ACCESS_KEY,
    TEST_REGION,
    TEST_SECRET,
    MotoS3Server,
)
from brain_pipeline_tests.peers.postgres import PostgresServer

REPO = Path(__file__).resolve().parents[2]
SAMPLE_CORPUS = REPO / "examples" / "curated-content"
SAMPLE_FIXTURE = REPO / "examples" / "retrieval-eval.json"
API_KEY = "workers-test-key-41"
DIMENSION = 32
STATE_BUCKET = "brain-state"
STATE_PREFIX = "state"
PUBLISH_BUCKET = "brain-publish"
PUBLISH_PREFIX = "agent/"
STORE_FILENAME = "knowledge-store.json"
DOCUMENT_TASK = "RETRIEVAL_DOCUMENT"  # the task type google-genai sends for chunk texts
QUERY_TASK = "RETRIEVAL_QUERY"
COMMAND_TIMEOUT_S = 600
BM25_ONLY = {"bm25": {"min_ndcg_at_10": 0.2, "max_misses": 100}}
"""The gate on the sample corpus: fake vectors carry no meaning, so BM25 only."""
DROPPED_ENV = (
    "GEMINI_API_KEY", "GOOGLE_API_KEY", "S3_BUCKET_NAME", "AWS_S3_BUCKET", "BRAIN_BUILD_DIR",
    "BRAIN_STATE_LEDGER", "BRAIN_STATE_BLOBS", "BRAIN_PUBLISH_ROOT", "DAGSTER_HOME",
    "BRAIN_CONFIG", "AWS_PROFILE", "AWS_SESSION_TOKEN",
)  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    """One finished command, as its user saw it."""

    argv: tuple[str, ...]
    code: int
    stdout: str
    stderr: str
    texts: int
    """Chunk texts the embedding service was paid for while the command ran."""
    queries: int
    """Query texts (the evaluation's) it was paid for: counted apart, as what the docs
    say a fresh worker pays again for what stays local."""
    seconds: float

    def explain(self) -> str:
        return (
            f"`{' '.join(self.argv)}` exit {self.code}, {self.texts} chunk texts and "
            f"{self.queries} queries embedded\n"
            f"stdout:\n{self.stdout[-3000:]}\nstderr:\n{self.stderr[-4000:]}"
        )

    def line(self, starting: str) -> str:
        """The first stdout or stderr line starting with `starting` ('' when none)."""
        for text in (self.stdout, self.stderr):
            for line in text.splitlines():
                if line.strip().startswith(starting):
                    return line.strip()
        return ""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree_digests(root: Path) -> dict[str, str]:
    """relative path -> sha256 of every file below `root` (empty when it is missing)."""
    if not root.is_dir():
        return {}
    return {
        path.relative_to(root).as_posix(): sha256(path.read_bytes())
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@dataclass
class Cluster:
    """What every worker shares: servers, corpus, configuration, publish root."""

    root: Path
    postgres: PostgresServer
    s3: MotoS3Server
    gemini: FakeGemini
    dagster_db: str
    ledger_db: str
    fixture: Path = SAMPLE_FIXTURE
    thresholds: dict[str, Any] = field(default_factory=lambda: dict(BM25_ONLY))
    workers: dict[str, Worker] = field(default_factory=dict)

    @property
    def corpus(self) -> Path:
        return self.root / "corpus"

    @property
    def config(self) -> Path:
        return self.root / "brain.yaml"

    @property
    def publish_root(self) -> Path:
        return self.root / "agent"

    @property
    def ledger_url(self) -> str:
        pg = self.postgres
        return f"postgresql://{pg.superuser}@{pg.host}:{pg.port}/{self.ledger_db}"

    @property
    def blobs_url(self) -> str:
        return f"s3://{STATE_BUCKET}/{STATE_PREFIX}"

    # -- set-up ----------------------------------------------------------------------

    @classmethod
    def create(
        cls, root: Path, postgres: PostgresServer, s3: MotoS3Server, gemini: FakeGemini,
        name: str, corpus: Path = SAMPLE_CORPUS, fixture: Path = SAMPLE_FIXTURE,
        thresholds: dict[str, Any] | None = None,
    ) -> Cluster:  # fmt: skip
        """Fresh databases and buckets named after `name`, a copy of `corpus` (default:
        the sample corpus), the config (gating on BM25 unless `thresholds` says else)."""
        root.mkdir(parents=True, exist_ok=True)
        cluster = cls(
            root=root,
            postgres=postgres,
            s3=s3,
            gemini=gemini,
            dagster_db=postgres.create_database(f"dagster_{name}"),
            ledger_db=postgres.create_database(f"ledger_{name}"),
            fixture=fixture,
            thresholds=dict(BM25_ONLY) if thresholds is None else thresholds,
        )
        client = cluster.s3_client()
        for bucket in (STATE_BUCKET, PUBLISH_BUCKET):
            with suppress(client.exceptions.BucketAlreadyOwnedByYou):
                client.create_bucket(Bucket=bucket)
        import shutil

        shutil.copytree(corpus, cluster.corpus)
        cluster.write_config()
        return cluster

    def write_config(self, **extra: Any) -> None:
        """The shared configuration, outside every worker's folder (paths absolute)."""
        settings: dict[str, Any] = {
            "corpus": {"path": str(self.corpus), "candidates": []},
            "embedding": {"provider": "gemini", "dimension": DIMENSION},
            "evaluation": {"fixture": str(self.fixture), "thresholds": self.thresholds},
            "publish": {
                "root": str(self.publish_root),
                "s3": {
                    "bucket": PUBLISH_BUCKET,
                    "prefix": PUBLISH_PREFIX,
                    "region": TEST_REGION,
                    "endpoint_url": self.s3.endpoint_url,
                },
            },  # fmt: skip
            "schedule": {"enabled": False, "sensor_enabled": False},
            "state": {"ledger": self.ledger_url, "blobs": self.blobs_url},
        }
        for dotted, value in extra.items():
            node = settings
            *parents, leaf = dotted.split("__")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        self.config.write_text(yaml.safe_dump(settings), encoding="utf-8")

    def worker(self, name: str) -> Worker:
        """The worker `name`, created on first use with empty folders."""
        if name not in self.workers:
            self.workers[name] = Worker.create(self, name)
        return self.workers[name]

    # -- what the user sees ----------------------------------------------------------

    def s3_client(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.s3.endpoint_url,
            region_name=TEST_REGION,
            aws_access_key_id=TEST_ACCESS_KEY,
            aws_secret_access_key=TEST_SECRET,
        )

    def s3_keys(self, bucket: str = PUBLISH_BUCKET, prefix: str = "") -> set[str]:
        client = self.s3_client()
        keys: set[str] = set()
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.update(item["Key"] for item in page.get("Contents", []))
        return keys

    def s3_bytes(self, key: str, bucket: str = PUBLISH_BUCKET) -> bytes | None:
        client = self.s3_client()
        try:
            return bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())
        except client.exceptions.NoSuchKey:
            return None

    def s3_store_sha256(self) -> str | None:
        """sha256 of the published store in the bucket (None: nothing published)."""
        data = self.s3_bytes(PUBLISH_PREFIX + STORE_FILENAME)
        return None if data is None else sha256(data)

    def published(self) -> dict[str, str]:
        """The publish root's files (relative path -> sha256)."""
        return tree_digests(self.publish_root)

    def live_store(self) -> bytes | None:
        path = self.publish_root / "src" / "storage" / STORE_FILENAME
        return path.read_bytes() if path.is_file() else None

    def texts_embedded(self) -> int:
        """Chunk texts embedded so far (documents; the evaluation's queries apart)."""
        return self.gemini.stats().task_types.get(DOCUMENT_TASK, 0)

    def queries_embedded(self) -> int:
        return self.gemini.stats().task_types.get(QUERY_TASK, 0)

    def edit(self, text: str, relative: str | None = None) -> Path:
        """Append a paragraph to one corpus file (the first, sorted, unless named)."""
        path = self.corpus / relative if relative else sorted(self.corpus.rglob("*.md"))[0]
        with path.open("a", encoding="utf-8") as handle:
            handle.write(f"\n\n{text}\n")
        return path


@dataclass
class Worker:
    """One machine's folder: empty build directory, own DAGSTER_HOME, own temp folder."""

    cluster: Cluster
    name: str
    folder: Path

    @property
    def build_dir(self) -> Path:
        return self.folder / "build"

    @property
    def home(self) -> Path:
        return self.folder / "dagster_home"

    @property
    def tmp(self) -> Path:
        return self.folder / "tmp"

    @classmethod
    def create(cls, cluster: Cluster, name: str) -> Worker:
        folder = cluster.root / "workers" / name
        worker = cls(cluster, name, folder)
        worker.tmp.mkdir(parents=True)
        worker.home.mkdir(parents=True)
        settings = {
            "storage": cluster.postgres.dagster_storage(cluster.dagster_db),
            "telemetry": {"enabled": False},
            "nux": {"enabled": False},
        }
        (worker.home / "dagster.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
        return worker

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        cluster = self.cluster
        env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
        env.update(
            {
                "PYTHONPATH": str(REPO),
                "BRAIN_CONFIG": str(cluster.config),
                "BRAIN_BUILD_DIR": str(self.build_dir),
                "DAGSTER_HOME": str(self.home),
                "TMPDIR": str(self.tmp),
                "GEMINI_API_KEY": API_KEY,
                "GOOGLE_GEMINI_BASE_URL": cluster.gemini.url,
                "AWS_ACCESS_KEY_ID": TEST_ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": TEST_SECRET,
                "AWS_DEFAULT_REGION": TEST_REGION,
                "AWS_ENDPOINT_URL_S3": cluster.s3.endpoint_url,
                "PGUSER": cluster.postgres.superuser,
            }
        )
        env.update(extra or {})
        return env

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "brain_pipeline.cli", *args]

    def start(
        self, *args: str, argv: list[str] | None = None, env: dict[str, str] | None = None
    ) -> subprocess.Popen[str]:
        """Start a command (its own process group, so a test can kill -9 exactly it)."""
        return subprocess.Popen(
            argv or self.command(*args),
            cwd=self.folder,
            env=self.env(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def run(
        self, *args: str, argv: list[str] | None = None, env: dict[str, str] | None = None
    ) -> Outcome:
        """Run a command to its end; what it printed and what it paid for embedding."""
        before = self.cluster.texts_embedded(), self.cluster.queries_embedded()
        started = time.monotonic()
        proc = self.start(*args, argv=argv, env=env)
        try:
            out, err = proc.communicate(timeout=COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            out, err = proc.communicate()
        return Outcome(
            argv=tuple(argv or args),
            code=int(proc.returncode),
            stdout=out,
            stderr=err,
            texts=self.cluster.texts_embedded() - before[0],
            queries=self.cluster.queries_embedded() - before[1],
            seconds=time.monotonic() - started,
        )

    def materialize(self, *args: str, env: dict[str, str] | None = None) -> Outcome:
        return self.run("materialize", *args, env=env)


def kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the process group a `Worker.start` made (this process's own child only)."""
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def communicate_all(
    procs: dict[str, subprocess.Popen[str]], timeout: float = COMMAND_TIMEOUT_S
) -> dict[str, tuple[int, str, str]]:
    """Wait for processes running at once, reading all their pipes at once (one reader
    each: a full pipe would stall a process that may be holding what the others wait for).
    name -> (exit code, stdout, stderr)."""
    import threading

    results: dict[str, tuple[int, str, str]] = {}

    def finish(name: str, proc: subprocess.Popen[str]) -> None:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            out, err = proc.communicate()
        results[name] = (int(proc.returncode), out, err)

    readers = [threading.Thread(target=finish, args=item) for item in procs.items()]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    return results


def wait_until(predicate: Callable[[], bool], timeout: float = 300.0, step: float = 0.05) -> None:
    """Poll `predicate` (a peer's observable state, never a guessed delay) until true."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached in time")
        time.sleep(step)


def iter_lines(proc: subprocess.Popen[str]) -> Iterator[str]:
    assert proc.stderr is not None
    yield from proc.stderr
