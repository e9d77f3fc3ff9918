"""What observing an unchanged corpus costs, against the floor of a bare walk.

Generates bench_scale.py's synthetic corpus, observes it once (so every file is settled
in the file index), then measures in fresh processes, taking turns within each round:

  floor      a bare recursive `os.scandir` walk that stats every file (what any walk
             that notices edits must do at least)
  walk       corpus.discovery's walk alone (junk rules, symlink checks, store order)
  observe    corpus.observation.observe_corpus(record=False): the walk plus the file
             index lookups and the corpus digest (what the up-to-date check and the
             `corpus` observation pay when nothing changed)

Each figure is the CPU time (`time.process_time`) of the operation inside its process,
imports excluded; the table gives the median of `--repeat` rounds with the range and
each step's ratio to the floor taken round by round (benchmarks/_figures.py). The three
take turns within each round (the first one rotating); the reference unit is timed
before, between the rounds and after, and printed with the command and the load.

Usage::

    python benchmarks/bench_walk.py --files 70000
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _figures import Session, ratio
from bench_scale import generate_corpus

REPO = Path(__file__).resolve().parents[1]

PROGRAMS = {
    "floor": """
import os, sys, time
def walk(path):
    n = 0
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                n += walk(entry.path)
            else:
                entry.stat(follow_symlinks=False)
                n += 1
    return n
start = time.process_time()
walk(sys.argv[1])
print(time.process_time() - start)
""",
    "walk": """
import sys, time
from brain_pipeline.corpus.discovery import walk_corpus
start = time.process_time()
for _ in walk_corpus(sys.argv[1]):
    pass
print(time.process_time() - start)
""",
    "observe": """
import sys, time
from brain_pipeline.corpus.observation import observe_corpus
from brain_pipeline.state.layout import StateLayout
from pathlib import Path
layout = StateLayout.of(sys.argv[2])
start = time.process_time()
observe_corpus(Path(sys.argv[1]), layout, record=False)
print(time.process_time() - start)
""",
}


def measure(program: str, corpus: Path, build: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", program, str(corpus), str(build)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args(argv)
    session = Session(runs=args.repeat).start()
    base = Path(tempfile.mkdtemp(prefix="bench-walk-"))
    try:
        corpus = generate_corpus(base / "corpus", args.files, args.seed).root
        build = base / "build"
        from brain_pipeline.corpus.observation import observe_corpus
        from brain_pipeline.state.layout import StateLayout

        layout = StateLayout.of(build)
        # Two observations: the second one re-hashes what was too fresh for the first.
        observe_corpus(corpus, layout, window_ns=0)
        observe_corpus(corpus, layout, window_ns=0)
        actions = {
            name: (lambda p=program: measure(p, corpus, build))
            for name, program in PROGRAMS.items()
        }
        # Each action returns the CPU-s its process measured; that is the sample.
        figures = session.rounds(actions, measure=lambda action: float(action()))  # type: ignore[arg-type]
        print(f"\n{args.files:,} files, unchanged: CPU-s, median [min-max] of {args.repeat}")
        print("| step | CPU-s | x floor (per round) |")
        print("|---|---|---|")
        for name, figure in figures.items():
            times_floor = ratio(figure, figures["floor"])
            print(
                f"| {name} | {figure.median:.3f} [{figure.low:.3f}-{figure.high:.3f}] "
                f"| {times_floor.median:.2f} [{times_floor.low:.2f}-{times_floor.high:.2f}] |"
            )
        session.finish()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
