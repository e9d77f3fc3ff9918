"""Chunk history at scale: cost of `record_store` when nothing / a little is new.

Usage: python benchmarks/bench_history.py [--chunks 200000] [--changed 1000]

Synthetic chunks (about 370 characters each, 40 per file, 4 areas) go through
`record_store` three times into a fresh build directory: the first store (every id
new), the same store again (nothing new: the steady state of a re-run), and a store
where `--changed` chunks were edited (new ids). Prints seconds per call, the history
file's size, and the time of one `lookup`.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from brain_pipeline.corpus import history  # noqa: E402
from brain_pipeline.corpus.store import Chunk, chunk_id  # noqa: E402
from brain_pipeline.state.layout import StateLayout  # noqa: E402

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "network",
    "subnet",
    "policy",
    "bucket",
    "instance",
    "region",
]


def make(i: int, version: int, rng: random.Random) -> Chunk:
    text = f"paragraph {i} v{version} " + " ".join(rng.choice(WORDS) for _ in range(50))
    area = f"area{i % 4}"
    return Chunk(chunk_id(text), text, area, f"{area}/dir/file{i // 40}.md", f"H {i // 10}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=200_000)
    parser.add_argument("--changed", type=int, default=1000)
    args = parser.parse_args()
    rng = random.Random(1)
    chunks = [make(i, 0, rng) for i in range(args.chunks)]
    edited = list(chunks)
    for i in rng.sample(range(args.chunks), args.changed):
        edited[i] = make(i, 1, rng)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    with tempfile.TemporaryDirectory() as tmp:
        layout = StateLayout.of(tmp)
        for label, store, when in (
            ("first store (all new)", chunks, t0),
            ("same store again", chunks, t0 + timedelta(hours=1)),
            (f"{args.changed} chunks edited", edited, t0 + timedelta(hours=2)),
        ):
            start = time.perf_counter()
            outcome = history.record_store(layout, store, when)
            seconds = time.perf_counter() - start
            print(f"{label:<24} {outcome.chunks} chunks, {outcome.new:>6} new: {seconds:6.2f} s")
        size = history.stats(layout)["bytes"]
        print(f"history file: {size / 1e6:.1f} MB for {history.stats(layout)['ids']} ids")
        start = time.perf_counter()
        entry = history.lookup(layout, chunks[7].id)
        assert entry is not None
        print(f"lookup: {(time.perf_counter() - start) * 1000:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
