"""One edit on a fresh worker against one edit on a warm worker (issue 41's budget: a
fresh worker at most twice a warm one's cost at 19k chunks), PostgreSQL + S3 on loopback.

Starts a throw-away PostgreSQL server (brain_pipeline_tests/peers/postgres.py: the
instance's run storage and the ledger), moto's S3 server (the blobs and the publish
bucket) and the fake Gemini server (embeddings: it counts the texts), generates
bench_scale.py's synthetic corpus (`--files 1200`: about 19k chunks, as
bench_run_cost.py does) and builds it once on the warm worker. Then, `--runs` rounds
(default 5; benchmarks/_figures.py interleaves them, the first alternating):

  warm    append one paragraph to one file; `brain-pipeline materialize` on the worker
          that built everything (its build directory and DAGSTER_HOME kept)
  fresh   append one paragraph to another file; `brain-pipeline materialize` on a new
          worker: an empty build directory, its own DAGSTER_HOME, its own temp folder

Every worker is a separate process tree with its own folder, sharing only PostgreSQL
and the buckets (brain_pipeline_tests/workers/harness.py, the set-up the fresh-worker
tests use). Prints each kind's wall seconds, chunk texts embedded and the S3 store's
sha256 after its last round, side by side, and the fresh/warm ratio per round. A run
that exits non-zero stops the benchmark with what it printed.

Usage::

    python benchmarks/bench_fresh_worker.py                    # 1,200 files, 5 rounds
    python benchmarks/bench_fresh_worker.py --files 60 --runs 1   # a short check
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
from pathlib import Path

from _figures import Session, ratio
from bench_scale import generate_corpus

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from brain_pipeline_tests.peers.fake_gemini import FakeGemini  # noqa: E402
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server  # noqa: E402
from brain_pipeline_tests.peers.postgres import PostgresServer  # noqa: E402
from brain_pipeline_tests.workers.harness import API_KEY, Cluster, Outcome  # noqa: E402


def checked(outcome: Outcome) -> Outcome:
    if outcome.code != 0:
        raise SystemExit(f"bench_fresh_worker: a run failed\n{outcome.explain()}")
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1200, help="synthetic corpus size")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--runs", type=int, default=5, help="rounds (median of N)")
    args = parser.parse_args(argv)

    session = Session(runs=args.runs).start()
    with (
        tempfile.TemporaryDirectory(prefix="bench-fresh-worker-") as tmp,
        PostgresServer.running() as postgres,
        MotoS3Server.start() as s3,
        FakeGemini(api_key=API_KEY) as gemini,
    ):
        base = Path(tmp)
        corpus = generate_corpus(base / "generated", args.files, args.seed)
        cluster = Cluster.create(
            base / "cluster", postgres, s3, gemini, name="bench",
            corpus=corpus.root, fixture=corpus.fixture, thresholds={},
        )  # fmt: skip
        files = sorted(p for p in cluster.corpus.rglob("*.md") if p.is_file())
        fixture_files = {cluster.corpus / p.relative_to(corpus.root) for p in corpus.fixture_files}
        editable = itertools.cycle([p for p in files if p not in fixture_files])
        warm = cluster.worker("warm")
        full = checked(warm.materialize())
        print(
            f"corpus: {args.files:,} synthetic files, {full.texts:,} chunk texts; "
            f"full build on the warm worker {full.seconds:.1f} s",
            flush=True,
        )
        fresh_workers = (cluster.worker(f"fresh-{n}") for n in itertools.count(1))
        paid: dict[str, list[int]] = {"warm": [], "fresh": []}
        outcomes: dict[str, Outcome] = {}
        rounds = itertools.count(1)

        def one_edit(kind: str) -> float:
            path = next(editable)
            with path.open("a", encoding="utf-8") as handle:
                handle.write(f"\n\nAn appended paragraph, round {next(rounds)}, about caches.\n")
            worker = warm if kind == "warm" else next(fresh_workers)
            outcome = checked(worker.materialize())
            paid[kind].append(outcome.texts)
            outcomes[kind] = outcome
            return outcome.seconds

        figures = session.rounds(
            {"warm": lambda: one_edit("warm"), "fresh": lambda: one_edit("fresh")},
            measure=lambda action: float(action()),  # type: ignore[arg-type]
        )
        print()
        print(f"{'one edit':<16}{'warm worker':<34}{'fresh worker':<34}")
        print(
            f"{'wall':<16}{figures['warm'].text('{:.1f}', 's'):<34}"
            f"{figures['fresh'].text('{:.1f}', 's'):<34}"
        )
        print(
            f"{'texts embedded':<16}{statistics.median(paid['warm']):<34}"
            f"{statistics.median(paid['fresh']):<34}"
        )
        store = cluster.s3_store_sha256() or "-"
        print(f"S3 store sha256 after the last round: {store}")
        per_round = ratio(figures["fresh"], figures["warm"])
        print(f"fresh / warm, per round: {per_round.text('{:.2f}', '×')}")
    session.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
