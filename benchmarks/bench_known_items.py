"""What the known-item check adds to an evaluation: a full build and a one-edit build.

    python benchmarks/bench_known_items.py                 # 1,200 files, ~19,000 chunks
    python benchmarks/bench_known_items.py --files 1200 --runs 5

The corpus is bench_scale.py's synthetic one (4 areas, Zipf vocabulary, about 15.6
chunks per file), ingested and written as the build directory's store. Timed, as CPU
seconds of this process (`time.process_time`, one thread) and wall seconds, is
`evaluation.service.known_items_of`, the whole known-item step of an evaluation: asking
the baseline's known items, sampling this store's own (queries cached per chunk id) and
saving the caches, candidate and answers. BM25 indexes are built before the timer starts,
because the labelled evaluation of the same run builds them anyway (the check's own cost
is what this measures); the labelled evaluation of bench_scale's 8-query fixture on the
same store is timed beside it, as the peer that already runs in every evaluation.

  full      a build directory with no known-item state (a first build): every area is
            sampled and searched; measured twice: with the BM25 indexes the labelled
            evaluation built, and with none cached (no labels: the check builds them)
  one-edit  after a publication recorded the baseline: one paragraph of one file
            replaced, the store rebuilt; only the edited area is searched again

Each case runs `--runs` times (default 5) from the same starting state (the state
directory is restored between runs) and prints median [min-max].
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from _figures import DEFAULT_RUNS, Figure, Session
from bench_scale import edit_one_file, generate_corpus

from brain_pipeline.config import BrainConfig, load_config
from brain_pipeline.corpus import store_reader
from brain_pipeline.corpus.file_chunks import ingest_corpus
from brain_pipeline.corpus.store import serialize_store
from brain_pipeline.corpus.store_reader import open_store_view
from brain_pipeline.evaluation import eval_record
from brain_pipeline.evaluation.known_item_run import directory
from brain_pipeline.evaluation.service import (
    evaluate_store_dir,
    judgement_memory,
    known_items_of,
    record_as_baseline,
)
from brain_pipeline.retrieval.view_source import ViewSource
from brain_pipeline.state.layout import StateLayout


def write_store(corpus: Path, build: Path) -> int:
    chunks = ingest_corpus(corpus).chunks
    (build / "knowledge-store.json").write_bytes(serialize_store(chunks))
    with store_reader._VIEWS_LOCK:  # a new store file: a new view, as a new process sees
        store_reader._VIEWS.clear()
    return len(chunks)


def warm_indexes(build: Path, layout: StateLayout) -> None:
    """Build (and cache) every area's BM25 index: the labelled evaluation does so anyway."""
    view = open_store_view(build / "knowledge-store.json", layout)
    source = ViewSource(view, layout)
    for area in source.areas():
        source.bm25(area)


def cpu_and_wall(action: Callable[[], Any]) -> tuple[float, float, Any]:
    cpu, wall = time.process_time(), time.perf_counter()
    result = action()
    return time.process_time() - cpu, time.perf_counter() - wall, result


def measure(
    session: Session,
    runs: int,
    cfg: BrainConfig,
    build: Path,
    state_copy: Path,
    *,
    cold: bool = False,
) -> dict[str, Figure]:
    """`runs` known-item steps, each from the state saved in `state_copy` (`cold`: with
    no BM25 index cached, so the step builds them, as with no labels it does)."""
    layout = StateLayout.of(build)
    cpu: list[float] = []
    wall: list[float] = []
    searched = 0
    for _ in range(runs):
        if cold:
            shutil.rmtree(layout.bm25_dir, ignore_errors=True)
            with store_reader._VIEWS_LOCK:
                store_reader._VIEWS.clear()
        shutil.rmtree(layout.state_dir / "known-items", ignore_errors=True)
        if (state_copy / "known-items").exists():
            shutil.copytree(state_copy / "known-items", layout.state_dir / "known-items")
        inputs = {"store_sha256": "bench", "embeddings_sha256": None}
        spent, elapsed, run = cpu_and_wall(partial(known_items_of, cfg, build, layout, inputs))
        cpu.append(spent)
        wall.append(elapsed)
        searched = run.searched
        session.note_reference()
    print(f"    queries searched per run: {searched}")
    return {"cpu": Figure.of(cpu), "wall": Figure.of(wall)}


def labelled_peer(session: Session, runs: int, cfg: BrainConfig, build: Path) -> Figure:
    """The labelled evaluation of the same store (no reuse), CPU seconds."""
    samples = []
    for _ in range(runs):
        spent, _, _ = cpu_and_wall(lambda: evaluate_store_dir(cfg, build, reuse=False))
        samples.append(spent)
        session.note_reference()
    return Figure.of(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1200)
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    session = Session(runs=args.runs).start()
    with tempfile.TemporaryDirectory(prefix="bench-known-items-") as tmp:
        root = Path(tmp)
        corpus = generate_corpus(root / "corpus", args.files, args.seed)
        build = root / "build"
        build.mkdir()
        config = root / "corpus_config.yaml"
        config.write_text(
            f"build_dir: {build}\nembedding:\n  provider: none\n"
            f"evaluation:\n  fixture: {corpus.fixture}\n"
        )
        cfg = load_config(config, env={})
        layout = StateLayout.of(build)
        n = write_store(corpus.root, build)
        warm_indexes(build, layout)
        print(f"store: {n:,} chunks in 4 areas, {args.files:,} files; "
              f"sample_per_area {cfg.evaluation.known_items.sample_per_area}")
        empty = root / "empty-state"
        empty.mkdir()
        print("full build (no known-item state):")
        full = measure(session, args.runs, cfg, build, empty)
        print(f"  known items  CPU {full['cpu'].text('{:.3f}', 's')}; "
              f"wall {full['wall'].text('{:.3f}', 's')}")
        print("full build with no labels (no BM25 index cached: the check builds them):")
        cold = measure(session, args.runs, cfg, build, empty, cold=True)
        print(f"  known items  CPU {cold['cpu'].text('{:.3f}', 's')}; "
              f"wall {cold['wall'].text('{:.3f}', 's')}")
        warm_indexes(build, layout)
        peer = labelled_peer(session, args.runs, cfg, build)
        print(f"  peer: the whole evaluation of this store (8 labelled queries x 3 "
              f"retrievers; its known-item step answered from the caches) CPU "
              f"{peer.text('{:.3f}', 's')}")

        # Publish: the evaluation's candidate becomes the baseline.
        outcome = evaluate_store_dir(cfg, build)
        record = eval_record.lookup(judgement_memory(cfg), str(outcome.record_key))
        assert record is not None
        record_as_baseline(cfg, record, kind="published")
        published = root / "published-state"
        shutil.copytree(directory(layout), published / "known-items")
        edit_one_file(corpus)
        write_store(corpus.root, build)
        warm_indexes(build, layout)
        print("one-edit build (after a publication; one paragraph replaced):")
        one = measure(session, args.runs, cfg, build, published)
        print(f"  known items  CPU {one['cpu'].text('{:.3f}', 's')}; "
              f"wall {one['wall'].text('{:.3f}', 's')}")
        final = known_items_of(cfg, build, layout, {"store_sha256": "bench"})
        print(f"  verdict: {final.verdict.summary()}; failures {len(final.verdict.failures)}, "
              f"warnings {len(final.verdict.warnings)}")
    session.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
