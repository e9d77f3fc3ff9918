"""Incremental ingest core (observe, chunk, assemble) next to the full `ingest_corpus`.

The generator writes a deterministic synthetic corpus:

* `--areas` top-level areas (default 4), files spread evenly, each area nested two
  folders deep (`area/dN/file-M.md`), 1 % of the files roadmap JSON
  (`area/roadmaps/formatted-M.json`, 10–30 topics).
* Markdown files of 5–22 paragraphs (about 16 chunks on average with headings), a
  `#`/`##` heading every few paragraphs, 5 % CRLF files.
* Words from a vocabulary of 20,000 pseudo-words drawn with Zipf weights (1/rank), so
  common words repeat like in real prose and the store size is realistic.
* About 2 % of paragraphs come from a pool of shared boilerplate paragraphs, so
  de-duplication has work to do across files and areas.
* Every file's mtime is set one hour back: a corpus that has settled, as between two
  real runs (fresh mtimes would fall inside the index's re-hash window).

Then, in one process, it measures (CPU seconds of this process, and wall seconds):

  ingest_corpus   the full non-incremental path: walk, read, chunk, de-duplicate, bytes
  full            observe_corpus + chunk_snapshot + assemble_store on an empty build dir
  no-change       the same again, nothing touched
  one-file-edit   one Markdown file gets a new paragraph

and checks that every assembled store is byte-identical to `ingest_corpus`'s (run after
the incremental rounds, so "peak RSS so far" is the incremental path's own). The whole
sequence is repeated `--repeat` times (default 5) on a fresh build directory; a summary
prints each total as median [min-max] over the repeats (benchmarks/_figures.py), with a
reference unit timed between them to state the machine's speed.

    PYTHONPATH=. python benchmarks/bench_state.py --files 10000 [--seed 7] [--keep DIR]
                                                  [--repeat 5]
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import resource
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from _figures import DEFAULT_RUNS, Figure, Session

from brain_pipeline.corpus.assembly import assemble_store
from brain_pipeline.corpus.chunk_cache import chunk_snapshot
from brain_pipeline.corpus.file_chunks import ingest_corpus
from brain_pipeline.corpus.observation import observe_corpus
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.utils.digest import sha256_hex

T = TypeVar("T")
VOCABULARY_SIZE = 20_000
SHARED_PARAGRAPHS = 400
DUPLICATE_RATE = 0.02
ROADMAP_RATE = 0.01
SETTLED_AGE_NS = 3600 * 10**9


def _vocabulary(rng: random.Random) -> tuple[list[str], list[float]]:
    """Pseudo-words with cumulative Zipf weights (rank r drawn with weight 1/r)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"".join(rng.choices(letters, k=rng.randrange(2, 11))) for _ in range(30_000)}
    vocabulary = sorted(words)[:VOCABULARY_SIZE]
    rng.shuffle(vocabulary)
    weights = list(itertools.accumulate(1.0 / rank for rank in range(1, len(vocabulary) + 1)))
    return vocabulary, weights


class Generator:
    """Deterministic text from a seed; see the module docstring for the shape."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words, self.cum = _vocabulary(self.rng)
        self.shared = [self.paragraph() for _ in range(SHARED_PARAGRAPHS)]

    def sentence(self) -> str:
        words = self.rng.choices(self.words, cum_weights=self.cum, k=self.rng.randrange(5, 20))
        return " ".join(words).capitalize() + "."

    def paragraph(self) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randrange(1, 5)))

    def markdown(self) -> str:
        rng = self.rng
        parts = [f"# {self.sentence()[:-1]}"]
        for _ in range(rng.randrange(5, 23)):
            if rng.random() < 0.15:
                parts.append(f"## {self.sentence()[:-1]}")
            if rng.random() < DUPLICATE_RATE:
                parts.append(rng.choice(self.shared))
            else:
                parts.append(self.paragraph())
        text = "\n\n".join(parts) + "\n"
        return text.replace("\n", "\r\n") if rng.random() < 0.05 else text

    def roadmap(self) -> str:
        import json

        topics = [
            {
                "label": self.sentence()[:-1],
                "type": self.rng.choice(["topic", "subtopic"]),
                "level": self.rng.choice(["beginner", "advanced", ""]),
            }
            for _ in range(self.rng.randrange(10, 31))
        ]
        body = {"title": self.sentence()[:-1], "description": self.sentence(), "topics": topics}
        return json.dumps(body)


def generate(root: Path, files: int, areas: int, seed: int) -> None:
    """Write the synthetic corpus (see the module docstring) and settle its mtimes."""
    gen = Generator(seed)
    settled = time.time_ns() - SETTLED_AGE_NS
    for index in range(files):
        area = f"area-{index % areas}"
        if gen.rng.random() < ROADMAP_RATE:
            path = root / area / "roadmaps" / f"formatted-{index}.json"
            text = gen.roadmap()
        else:
            path = root / area / f"d{index % 7}" / f"s{index % 53}" / f"file-{index}.md"
            text = gen.markdown()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        os.utime(path, ns=(settled, settled))


def measure(label: str, fn: Callable[[], T], figures: dict[str, Any]) -> T:
    cpu, wall = time.process_time(), time.perf_counter()
    result = fn()
    figures[label] = (time.process_time() - cpu, time.perf_counter() - wall)
    return result


#: (CPU s, wall s) of every round, by row name, over the repeats.
TOTALS: dict[str, list[tuple[float, float]]] = {}


def incremental(corpus: Path, layout: StateLayout, name: str) -> str:
    """One observe/chunk/assemble round, printed as a row; returns the store's sha256."""
    figures: dict[str, Any] = {}
    target = layout.store_file
    snapshot = measure("observe", lambda: observe_corpus(corpus, layout), figures)
    report = measure("chunk", lambda: chunk_snapshot(snapshot, layout), figures)
    built = measure("assemble", lambda: assemble_store(snapshot, layout, target), figures)
    total_cpu = sum(cpu for cpu, _ in figures.values())
    total_wall = sum(wall for _, wall in figures.values())
    TOTALS.setdefault(f"incremental {name}", []).append((total_cpu, total_wall))
    cells = "  ".join(f"{k} {c:6.2f}/{w:6.2f}" for k, (c, w) in figures.items())
    print(
        f"{name:14} {cells}  total {total_cpu:6.2f}/{total_wall:6.2f}  "
        f"rehashed {len(snapshot.rehashed)} chunked {report.files_chunked} "
        f"store {'written' if built.written else 'unchanged'}  "
        f"peak RSS so far {peak_rss_mb():.0f} MB"
    )
    return built.sha256


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def full_ingest(corpus: Path, name: str, expected_sha: str) -> None:
    """`ingest_corpus` timed, and its bytes compared with the assembled store's."""
    figures: dict[str, Any] = {}
    result = measure("ingest", lambda: ingest_corpus(corpus), figures)
    data = measure("bytes", result.store_bytes, figures)
    cpu = sum(c for c, _ in figures.values())
    wall = sum(w for _, w in figures.values())
    TOTALS.setdefault(f"ingest_corpus {name}", []).append((cpu, wall))
    same = sha256_hex(data) == expected_sha
    print(
        f"{name:14} ingest_corpus+store_bytes {cpu:6.2f}/{wall:6.2f}  "
        f"chunks {len(result.chunks)} collapsed {result.duplicates_collapsed} "
        f"store {len(data) / 1e6:.0f} MB  identical={same}"
    )
    if not same:
        raise SystemExit(f"{name}: the assembled store differs from ingest_corpus")


#: Unique per benchmark run, so a corpus kept with --keep gets a genuinely new paragraph.
EDIT = f"\nA brand new paragraph written by the benchmark's one-file edit {time.time_ns()}.\n"


def edit_one_file(corpus: Path, *, undo: bool = False) -> None:
    """Append a paragraph to the first Markdown file in sorted order (or take it away)."""
    first = min(corpus.rglob("file-*.md"))
    text = first.read_text(encoding="utf-8")
    text = text.removesuffix(EDIT) if undo else text + EDIT
    first.write_text(text, encoding="utf-8")
    if undo:  # settled again, so the next repeat's corpus is the generated one
        settled = time.time_ns() - SETTLED_AGE_NS
        os.utime(first, ns=(settled, settled))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--areas", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", type=Path, help="generate into (or reuse) this folder")
    parser.add_argument("--repeat", type=int, default=DEFAULT_RUNS, help="repeats (median)")
    args = parser.parse_args()
    session = Session(runs=args.repeat).start()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-state-"))
    corpus, build = work / "corpus", work / "build"
    try:
        if not corpus.exists():
            started = time.perf_counter()
            generate(corpus, args.files, args.areas, args.seed)
            print(f"generated {args.files} files in {time.perf_counter() - started:.1f} s")
        print("CPU-s/wall-s; incremental rounds run first so their peak RSS is their own")
        for _ in range(max(args.repeat, 1)):
            shutil.rmtree(build, ignore_errors=True)
            layout = StateLayout.of(build)
            full_sha = incremental(corpus, layout, "full")
            incremental(corpus, layout, "no-change")
            edit_one_file(corpus)
            edit_sha = incremental(corpus, layout, "one-file-edit")
            edit_one_file(corpus, undo=True)
            full_ingest(corpus, "full", full_sha)
            edit_one_file(corpus)
            full_ingest(corpus, "one-file-edit", edit_sha)
            edit_one_file(corpus, undo=True)
            session.note_reference()
        print("summary, median [min-max] over the repeats:")
        for name, values in TOTALS.items():
            cpu = Figure.of(c for c, _ in values).text("{:.2f}", "CPU-s")
            wall = Figure.of(w for _, w in values).text("{:.2f}", "s")
            print(f"  {name:<30} {cpu}; wall {wall}")
        session.finish()
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
