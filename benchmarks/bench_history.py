"""Chunk history at scale: cost of `record_store` when nothing / a little is new.

Usage: python benchmarks/bench_history.py [--chunks 200000] [--changed 1000] [--repeat 5]

Synthetic chunks (about 370 characters each, 40 per file, 4 areas) go through
`record_store` three times into a fresh build directory (its default ledger): the
first store (every id new), the same store again (nothing new: the steady state of a
re-run), and a store where `--changed` chunks were edited (new ids). Prints seconds per
call, the history's compressed text bytes, and the time of one `lookup`. The sequence
is repeated `--repeat` times (default 5) into a fresh build directory; each figure is
the median [min-max] over the repeats (benchmarks/_figures.py), with a reference unit
timed between them to state the machine's speed.
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

from _figures import DEFAULT_RUNS, Figure, Session  # noqa: E402

from brain_pipeline.corpus import chunk_history  # noqa: E402
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
    parser.add_argument("--repeat", type=int, default=DEFAULT_RUNS, help="repeats (median)")
    args = parser.parse_args()
    session = Session(runs=args.repeat).start()
    rng = random.Random(1)
    chunks = [make(i, 0, rng) for i in range(args.chunks)]
    edited = list(chunks)
    for i in rng.sample(range(args.chunks), args.changed):
        edited[i] = make(i, 1, rng)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    steps = (
        ("first store (all new)", chunks, t0),
        ("same store again", chunks, t0 + timedelta(hours=1)),
        (f"{args.changed} chunks edited", edited, t0 + timedelta(hours=2)),
    )
    seconds: dict[str, list[float]] = {label: [] for label, _, _ in steps}
    lookups: list[float] = []
    for _ in range(max(args.repeat, 1)):
        with tempfile.TemporaryDirectory() as tmp:
            layout = StateLayout.of(tmp)
            for label, store, when in steps:
                start = time.perf_counter()
                outcome = chunk_history.record_store(layout, store, when)
                seconds[label].append(time.perf_counter() - start)
                print(f"{label:<24} {outcome.chunks} chunks, {outcome.new:>6} new: "
                      f"{seconds[label][-1]:6.2f} s", flush=True)
            size = chunk_history.stats(layout)["bytes"]
            ids = chunk_history.stats(layout)["ids"]
            start = time.perf_counter()
            entry = chunk_history.lookup(layout, chunks[7].id)
            lookups.append((time.perf_counter() - start) * 1000)
            assert entry is not None
        session.note_reference()
    print(f"history texts: {size / 1e6:.1f} MB compressed for {ids} ids")
    print("summary, median [min-max] over the repeats:")
    for label, values in seconds.items():
        print(f"  {label:<24} {Figure.of(values).text('{:.2f}', 's')}")
    print(f"  {'lookup':<24} {Figure.of(lookups).text('{:.2f}', 'ms')}")
    session.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
