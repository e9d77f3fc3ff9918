"""What one `brain-pipeline materialize` after one edit costs, part by part: a Dagster run.

Generates bench_scale.py's synthetic corpus (or takes the bundled sample corpus with
`--sample`), builds it once, then `--repeat` times appends one paragraph to one file
and runs the command in a fresh process. The process's own CPU (`time.process_time`)
is marked at each boundary by an import hook that wraps the functions below, without
importing anything itself (so it changes no import order):

  start-up         the interpreter until the command's module runs
  before Dagster   the CLI, configuration, preflight, the up-to-date check, the inputs
  import Dagster   `import dagster` and what it pulls in
  definitions      the code location: our defs modules and their Definitions
  instance         opening the instance (its storage layer loads here)
  before the run   locks, dead-run reaping
  the run          `execute_in_process`: every step and check, every stored event,
                   split into the steps' own code (the CPU spent inside the asset and
                   check functions, with the log lines they write) and Dagster's share
  after            the last-run record, the notification, the summary

and the whole command's CPU (user + system, interpreter exit included) is taken from
getrusage(RUSAGE_CHILDREN) around it, its wall seconds from the clock around it (on a busy
machine the wall figure carries the other processes' load; the CPU figures do not).

`--no-change` edits nothing (each round measures the up-to-date skip); `--full` empties
the build directory and the publish root before each round, so each round is a full
build: everything chunked, indexed, evaluated and published (with `embedding.provider:
none`, no vectors). The Dagster instance and the user's code-digest memo stay, as they
would on a workstation that deletes its build directory.

With `--before DIR` (a copy of older code, e.g. `git archive 44142d0 | tar -x -C DIR`)
the same edit runs as that code's Dagster run (`--select '*'`; its plain `materialize`
ran without Dagster) in the same rounds, taking turns; each row is then the median
[min-max] of both (benchmarks/_figures.py), with the reference unit timed between.

Usage::

    python benchmarks/bench_run_cost.py --files 1200 --before /tmp/before
    python benchmarks/bench_run_cost.py --sample --before /tmp/before
    python benchmarks/bench_run_cost.py --beir ../shared/datasets/scifact --before /tmp/before
    python benchmarks/bench_run_cost.py --files 1200 --before /tmp/before --plain-before --no-change
    python benchmarks/bench_run_cost.py ... --no-change --consult   (the hourly consult)
    python benchmarks/bench_run_cost.py --files 1200 --before /tmp/before --plain-before --full
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from _figures import Figure, Session
from beir_corpus import write_beir_corpus
from bench_scale import child_env, generate_corpus

REPO = Path(__file__).resolve().parents[1]

PROBE = r"""
import importlib.abc, importlib.util, json, sys, time
marks = [("start-up", time.process_time())]
def mark(name):
    marks.append((name, time.process_time()))
WRAP = {
    "brain_pipeline.definitions": ("build_definitions", "definitions"),
    "brain_pipeline.lib.instance": ("open_instance", "instance"),
    "brain_pipeline.lib.runner": ("materialize_selection", "the run"),
}
inside = [0.0]
def time_the_steps_own_code():
    # Every asset's and check's own function runs inside the generator Dagster's step
    # executor drives; the CPU spent in its next() calls is the steps' own (with the log
    # lines they write), the rest of "the run" is Dagster's step machinery and events.
    import dagster._core.execution.plan.execute_step as execute_step
    real = execute_step.execute_core_compute
    def timed(*args, **kwargs):
        events = real(*args, **kwargs)
        while True:
            started = time.process_time()
            try:
                event = next(events)
            except StopIteration:
                inside[0] += time.process_time() - started
                return
            inside[0] += time.process_time() - started
            yield event
    execute_step.execute_core_compute = timed
class Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "dagster" and name not in WRAP:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        run_module = spec.loader.exec_module
        def exec_module(module):
            if name == "dagster":
                mark("before Dagster")
                run_module(module)
                mark("import Dagster")
                time_the_steps_own_code()
                return
            run_module(module)
            function, label = WRAP[name]
            real = getattr(module, function)
            def timed(*args, **kwargs):
                if label == "the run":
                    mark("before the run")
                result = real(*args, **kwargs)
                mark(label)
                return result
            setattr(module, function, timed)
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, Hook())
from brain_pipeline.cli import main
code = main(sys.argv[1:])
mark("after")
durations = {"start-up": marks[0][1]}
for (_, before), (name, now) in zip(marks, marks[1:]):
    durations[name] = durations.get(name, 0.0) + now - before
durations["in process"] = marks[-1][1]
if "the run" in durations:
    durations["the run: the steps' own code"] = inside[0]
    durations["the run: Dagster (steps, events)"] = durations["the run"] - inside[0]
print("PARTS " + json.dumps({"code": code, "durations": durations}), file=sys.stderr)
"""

PARTS = (
    "start-up",
    "before Dagster",
    "import Dagster",
    "definitions",
    "instance",
    "before the run",
    "the run",
    "the run: the steps' own code",
    "the run: Dagster (steps, events)",
    "after",
    "in process",
    "whole command",
    "whole command, wall s",
)


def measure(env: dict[str, str], cwd: Path, argv: list[str]) -> dict[str, float]:
    """One command in a fresh process: its parts, its whole CPU from rusage and its wall
    seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "materialize", *argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = [line for line in done.stderr.splitlines() if line.startswith("PARTS ")]
    if not lines:
        raise SystemExit(f"probe failed:\n{done.stderr[-3000:]}")
    result = json.loads(lines[-1].removeprefix("PARTS "))
    if result["code"] != 0:
        raise SystemExit(f"materialize exited {result['code']}:\n{done.stderr[-3000:]}")
    parts = {k: float(v) for k, v in result["durations"].items()}
    parts["whole command"] = (after.ru_utime - before.ru_utime) + (
        after.ru_stime - before.ru_stime
    )
    parts["whole command, wall s"] = wall
    return parts


def write_config(workdir: Path, corpus: Path, fixture: Path) -> Path:
    config = workdir / "corpus_config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "corpus": {"path": str(corpus), "candidates": []},
                "build_dir": str(workdir / "build"),
                "embedding": {"provider": "none"},
                "evaluation": {"fixture": str(fixture), "thresholds": {}},
                "publish": {"root": str(workdir / "agent")},
                "schedule": {"enabled": False, "sensor_enabled": False},
            }
        ),
        encoding="utf-8",
    )
    return config


def sample_corpus(base: Path) -> tuple[Path, Path, list[Path]]:
    """A copy of the bundled sample corpus and its fixture; the files to edit."""
    corpus = base / "corpus"
    shutil.copytree(REPO / "examples" / "curated-content", corpus)
    fixture = base / "fixture.json"
    shutil.copy(REPO / "examples" / "retrieval-eval.json", fixture)
    files = sorted(p for p in corpus.rglob("*.md") if p.is_file())
    return corpus, fixture, files


def forget_confirmation(state: Path) -> None:
    """Make the next skip ask the instance (`--consult`): drop when the instance last
    confirmed the recorded run, as the code before the ledger kept it (a file) and as
    the ledger keeps it (`seen_at` in the up_to_date record)."""
    import sqlite3

    (state / "instance-seen.json").unlink(missing_ok=True)
    if (state / "ledger.sqlite").exists():
        with contextlib.closing(sqlite3.connect(state / "ledger.sqlite")) as db, db:
            rows = db.execute(
                "SELECT name, body FROM up_to_date WHERE name = 'record'"
            ).fetchall()
            for name, body in rows:
                record = json.loads(body)
                record.pop("seen_at", None)
                db.execute(
                    "UPDATE up_to_date SET body = ? WHERE name = ?", (json.dumps(record), name)
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1200, help="synthetic corpus size")
    parser.add_argument("--sample", action="store_true", help="the bundled sample corpus")
    parser.add_argument(
        "--beir",
        type=Path,
        metavar="DIR",
        help="a real-text corpus: a BEIR data set's documents as Markdown files and its "
        "test queries as the fixture (beir_corpus.py; SciFact gives about 19k chunks)",
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--before", type=Path, help="a copy of older code, run in turns")
    parser.add_argument(
        "--plain-before",
        action="store_true",
        help="run the older code as plain `materialize` too (its plain command already "
        "makes a Dagster run, e.g. 7442caa) instead of `--select '*'`",
    )
    parser.add_argument(
        "--no-change",
        action="store_true",
        help="edit nothing: each round measures the up-to-date skip",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="empty the build directory and the publish root before each round: each "
        "round measures a full build",
    )
    parser.add_argument(
        "--consult",
        action="store_true",
        help="with --no-change: make the skip ask the Dagster instance each round, as it "
        "does once an hour (the record of its last confirmation is removed first)",
    )
    args = parser.parse_args(argv)
    if args.full and (args.no_change or args.consult):
        parser.error("--full rebuilds everything: not with --no-change or --consult")
    session = Session(runs=args.repeat).start()
    base = Path(tempfile.mkdtemp(prefix="bench-run-cost-"))
    systems = ["now", *(["before"] if args.before else [])]
    try:
        if args.sample:
            corpus_root, fixture, files = sample_corpus(base)
            label = "the bundled sample corpus"
        elif args.beir:
            real = write_beir_corpus(args.beir, base / "corpus")
            corpus_root, fixture, files = real.root, real.fixture, real.files
            label = f"{len(files):,} {args.beir.name} documents as files (real text)"
        else:
            corpus = generate_corpus(base / "corpus", args.files, args.seed)
            corpus_root, fixture = corpus.root, corpus.fixture
            files = [f for f in corpus.files if f not in corpus.fixture_files]
            label = f"{args.files:,} synthetic files"
        envs: dict[str, dict[str, str]] = {}
        argvs = {"now": [], "before": [] if args.plain_before else ["--select", "*"]}
        for name in systems:
            workdir = base / name
            workdir.mkdir()
            env = child_env(write_config(workdir, corpus_root, fixture), workdir / "home")
            if name == "before":
                env["PYTHONPATH"] = str(args.before)
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an install: bytecode cached
            envs[name] = env
            measure(env, workdir, argvs[name])  # the full build (and bytecode)
        samples: dict[str, dict[str, list[float]]] = {n: {} for n in systems}
        for round_number in range(args.repeat):
            if not (args.no_change or args.full):
                target = files[round_number % len(files)]
                with target.open("a", encoding="utf-8") as handle:
                    handle.write(
                        f"\n\nAn appended paragraph, round {round_number}, about caches.\n"
                    )
            order = systems if round_number % 2 == 0 else systems[::-1]
            for name in order:
                if args.full:
                    for folder in ("build", "agent"):
                        shutil.rmtree(base / name / folder, ignore_errors=True)
                if args.consult:
                    forget_confirmation(base / name / "build" / "state")
                for part, value in measure(envs[name], base / name, argvs[name]).items():
                    samples[name].setdefault(part, []).append(value)
            session.note_reference()
        chunks = json.loads((base / "now" / "build" / "knowledge-store.json").read_bytes())
        print(
            f"\n{label}, {len(chunks):,} chunks, "
            + (
                "nothing changed (the up-to-date skip"
                + (", asking the instance" if args.consult else "")
                + ")"
                if args.no_change
                else "a full build (empty build directory and publish root)"
                if args.full
                else "one paragraph appended per run"
            )
            + ": CPU-s (the last row wall s), "
            f"median [min-max] of {args.repeat}"
        )
        print("| part | " + " | ".join(systems) + " |")
        print("|---|" + "---|" * len(systems))
        for part in PARTS:
            cells = []
            for name in systems:
                values = samples[name].get(part)
                figure = Figure.of(values) if values else None
                cells.append(
                    f"{figure.median:.3f} [{figure.low:.3f}-{figure.high:.3f}]" if figure else "-"
                )
            print(f"| {part} | " + " | ".join(cells) + " |")
        session.finish()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.exit(main())
