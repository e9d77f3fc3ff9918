"""Where a one-edit run made without Dagster spends its CPU, step by step.

Generates bench_scale.py's synthetic corpus, builds it once with `brain-pipeline
materialize`, then `--repeat` times: appends one paragraph to one file and runs the
command's own code path (`cli.materialize.run`, so the up-to-date check, the input
record, the locks, the plan and the journal are all in it) in a fresh process that
reports `time.process_time` at each boundary:

  start-up   the interpreter until this probe runs
  imports    brain_pipeline.cli and what materialize imports before the plan starts
  before     configuration, preflight, the up-to-date check, the input record, locks
  <node>     each node of the plan (steps.plan.PLAN), from the run's own callback
  after      the journal, the last-run record, the summary
  total      all of it (the interpreter's exit is not included)

Each row is the median [min-max] of the repeats (benchmarks/_figures.py); the reference
unit is timed between them.

Usage::

    python benchmarks/bench_direct_steps.py --files 1200
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from _figures import Figure, Session
from bench_peers import append_paragraph
from bench_scale import child_env, generate_corpus

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys, time
marks = [("start-up", time.process_time())]
def mark(name):
    marks.append((name, time.process_time()))
import brain_pipeline.steps.direct_run as direct
from brain_pipeline.cli import build_parser, materialize
mark("imports")
plan = direct.run_plan
def timed_plan(ctx, on_entry=None):  # the command imports run_plan when it runs it
    mark("before")
    return plan(ctx, on_entry=lambda entry: mark(entry.name))
direct.run_plan = timed_plan
code = materialize.run(build_parser().parse_args(["materialize"]))
mark("after")
durations = {"start-up": marks[0][1]}
for (_, before), (name, now) in zip(marks, marks[1:]):
    durations[name] = now - before
durations["total"] = marks[-1][1]
print("STEPS " + json.dumps({"code": code, "durations": durations}))
"""


def measure(env: dict[str, str], cwd: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=cwd, capture_output=True, text=True
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("STEPS ")]
    if not lines:
        raise SystemExit(f"probe failed:\n{done.stderr[-3000:]}")
    result = json.loads(lines[-1].removeprefix("STEPS "))
    if result["code"] != 0:
        raise SystemExit(f"materialize exited {result['code']}:\n{done.stderr[-3000:]}")
    return {k: float(v) for k, v in result["durations"].items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args(argv)
    session = Session(runs=args.repeat).start()
    base = Path(tempfile.mkdtemp(prefix="bench-direct-"))
    try:
        corpus = generate_corpus(base / "corpus", args.files, args.seed)
        config = base / "corpus_config.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "corpus": {"path": str(corpus.root), "candidates": []},
                    "build_dir": str(base / "build"),
                    "embedding": {"provider": "none"},
                    "evaluation": {"fixture": str(corpus.fixture), "thresholds": {}},
                    "publish": {"root": str(base / "agent")},
                    "schedule": {"enabled": False, "sensor_enabled": False},
                }
            ),
            encoding="utf-8",
        )
        env = child_env(config, base / "home")
        first = [sys.executable, "-m", "brain_pipeline.cli", "materialize"]
        subprocess.run(first, env=env, cwd=base, check=True, capture_output=True)
        samples: dict[str, list[float]] = {}
        for round_number in range(args.repeat):
            append_paragraph(corpus, round_number)
            for name, seconds in measure(env, base).items():
                samples.setdefault(name, []).append(seconds)
            session.note_reference()
        chunks = sum(len([p for p in f.read_text().split("\n\n") if p.strip()])
                     for f in corpus.files)  # fmt: skip
        print(f"\n{args.files:,} files, ~{chunks:,} chunks, one paragraph appended per run: "
              f"CPU-s, median [min-max] of {args.repeat}")  # fmt: skip
        print("| part | CPU-s | share of the total (median) |")
        print("|---|---|---|")
        total = Figure.of(samples["total"]).median
        for name, values in samples.items():
            figure = Figure.of(values)
            print(f"| {name} | {figure.median:.3f} [{figure.low:.3f}-{figure.high:.3f}] "
                  f"| {figure.median / total:.0%} |")  # fmt: skip
        session.finish()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.exit(main())
