"""Side by side with the peers: what a full, a nothing-changed and a one-edit run cost.

Like bench_scale.py (the same synthetic corpus), but every run kind is measured for
brain-pipeline and for each peer framework that is installed (CocoIndex, LlamaIndex's
IngestionPipeline, LangChain's `index()`; see peer_runners.py for how each is set up).
They are an optional extra of the benchmark only (`pip install -e .[bench-peers]`),
never of the product; a peer that is not installed is left out and named.

Every run is a fresh process; its cost is the CPU time (user + system) of it and its
children, from getrusage(RUSAGE_CHILDREN) around it. Per corpus size and run kind,
each system runs `--repeat` times (default 5) and the table gives the median with the
range (benchmarks/_figures.py), and our ratio to each peer taken round by round. The
systems take turns within each round (the first one rotating), so a load change on the
machine hits all of them alike; the reference unit is timed before, between the rounds
and after, and printed with the command and the load average:

  full        an empty state (for brain-pipeline: build dir, DAGSTER_HOME, publish root)
  nothing     the same corpus again
  one-edit    one paragraph appended to one file (another file each round)

brain-pipeline runs `materialize` with embedding provider `none` (the peers use a fake
embedder), as its README says to: a Dagster run of every asset, and with nothing
changed its up-to-date path (no run). `nothing (--force)` is the no-change run forced
to happen. Where a run's CPU goes, part by part: bench_run_cost.py.
The children may write bytecode (PYTHONDONTWRITEBYTECODE is dropped), as an installed
project does; the first full round compiles it.

Usage::

    python benchmarks/bench_peers.py                       # 320 and 1,200 files
    python benchmarks/bench_peers.py --sizes 10000 --repeat 3 --peers cocoindex
    git archive OLD_COMMIT | tar -x -C /tmp/old      # a fixed copy of older code...
    python benchmarks/bench_peers.py --before /tmp/old  # ...measured in the same rounds
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml
from _figures import Figure, Session, ratio
from bench_scale import child_env, generate_corpus, run_measured

HERE = Path(__file__).resolve().parent
PEERS = {"cocoindex": "cocoindex", "llamaindex": "llama_index.core", "langchain": "langchain_core"}
OURS = "brain-pipeline"
BEFORE = "before"
KINDS = ("full", "nothing", "nothing (--force)", "one-edit")


def cell_text(samples: list[float], fmt: str = "{:.2f}") -> str:
    """`median [min-max]` of a cell's runs, or a dash for a cell not measured."""
    if not samples:
        return "-"
    figure = Figure.of(samples)
    return f"{fmt.format(figure.median)} [{fmt.format(figure.low)}-{fmt.format(figure.high)}]"


def installed_peers(wanted: list[str]) -> tuple[list[str], list[str]]:
    have = [p for p in wanted if importlib.util.find_spec(PEERS[p]) is not None]
    return have, [p for p in wanted if p not in have]


class System:
    """One system's state folder, and how to run it once on the corpus."""

    def __init__(
        self, name: str, workdir: Path, corpus: Path, fixture: Path, repo: Path | None = None
    ) -> None:
        self.name, self.workdir, self.corpus, self.fixture = name, workdir, corpus, fixture
        self.repo = repo  # another checkout of brain-pipeline to run instead of this one
        self.logs = workdir / "logs"
        self.runs = 0

    def reset(self) -> None:
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        self.logs.mkdir(parents=True)

    def command(self, extra: tuple[str, ...]) -> tuple[list[str], dict[str, str]]:
        if self.name not in (OURS, BEFORE):
            runner = str(HERE / "peer_runners.py")
            cmd = [sys.executable, runner, self.name, str(self.corpus), str(self.workdir / "state")]
            return cmd, child_env(self.workdir / "unused.yaml", self.workdir / "unused")
        config = self.workdir / "corpus_config.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "corpus": {"path": str(self.corpus), "candidates": []},
                    "build_dir": str(self.workdir / "build"),
                    "embedding": {"provider": "none"},
                    "retrieval": {"mode": "lexical"},
                    "evaluation": {"fixture": str(self.fixture), "thresholds": {}},
                    "publish": {"root": str(self.workdir / "agent")},
                    "schedule": {"enabled": False, "sensor_enabled": False},
                }
            ),
            encoding="utf-8",
        )
        cmd = [sys.executable, "-m", "brain_pipeline.cli", "materialize"]
        env = child_env(config, self.workdir / "home")
        if self.repo is not None:
            env["PYTHONPATH"] = str(self.repo)
        return cmd + list(extra), env

    def run(self, *extra: str) -> float:
        cmd, env = self.command(extra)
        self.runs += 1
        measured = run_measured(cmd, env, self.logs, f"run-{self.runs}")
        if measured.exit_code != 0:
            raise SystemExit(f"{self.name} exited {measured.exit_code}:\n{measured.stderr[-3000:]}")
        return measured.cpu_s


def append_paragraph(corpus: object, round_number: int) -> Path:
    """One paragraph appended to one file the fixture does not point into."""
    files = [f for f in corpus.files if f not in corpus.fixture_files]  # type: ignore[attr-defined]
    path = files[(len(files) // 2 + round_number * 7) % len(files)]
    with path.open("a", encoding="utf-8") as handle:
        handle.write("\n" + corpus.text.paragraph() + "\n")  # type: ignore[attr-defined]
    return path


def take_turns(
    session: Session,
    systems: dict[str, System],
    samples: dict[tuple[str, str], list[float]],
    kind: str,
    round_number: int,
    run: Callable[[System], float],
) -> None:
    """One round of `kind`: every system once, the first one rotating, then one
    reference unit."""
    names = list(systems)
    shift = round_number % len(names)
    for name in names[shift:] + names[:shift]:
        samples[(kind, name)].append(run(systems[name]))
    session.note_reference()


def fresh_run(system: System) -> float:
    system.reset()
    return system.run()


def bench_size(
    session: Session,
    files: int,
    base: Path,
    seed: int,
    peers: list[str],
    repeat: int,
    before: Path | None,
) -> dict:
    workdir = base / f"files-{files}"
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    corpus = generate_corpus(workdir / "corpus", files, seed)
    names = [OURS, *([BEFORE] if before else []), *peers]
    systems = {
        n: System(n, workdir / n, corpus.root, corpus.fixture, before if n == BEFORE else None)
        for n in names
    }
    samples: dict[tuple[str, str], list[float]] = {(k, n): [] for k in KINDS for n in names}
    for round_number in range(repeat):
        take_turns(session, systems, samples, "full", round_number, fresh_run)
    print(f"  {files} files, full rounds done", flush=True)
    for round_number in range(repeat):
        take_turns(session, systems, samples, "nothing", round_number, System.run)
        samples[("nothing (--force)", OURS)].append(systems[OURS].run("--force"))
    print(f"  {files} files, nothing-changed rounds done", flush=True)
    for round_number in range(repeat):
        append_paragraph(corpus, round_number)
        take_turns(session, systems, samples, "one-edit", round_number, System.run)
    print(f"  {files} files, one-edit rounds done", flush=True)
    chunks = sum(len([p for p in f.read_text().split("\n\n") if p.strip()]) for f in corpus.files)
    return {"files": files, "chunks": chunks, "names": names, "samples": samples}


def print_table(result: dict) -> None:
    names = result["names"]
    samples = result["samples"]
    print(
        f"\n{result['files']:,} files, ~{result['chunks']:,} chunks: CPU-s, "
        "median [min-max]; ours / peer taken per round"
    )
    header = ["run", *names] + [f"ours / {n}" for n in names[1:]]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for kind in KINDS:
        ours = samples[(kind, names[0])]
        ratios = []
        for name in names[1:]:
            peer = samples[(kind, name)]
            if ours and len(peer) == len(ours):
                per_round = ratio(Figure.of(ours), Figure.of(peer))
                ratios.append(cell_text(list(per_round.samples)) + "x")
            else:
                ratios.append("-")
        cells = [cell_text(samples[(kind, n)]) for n in names]
        print("| " + " | ".join([kind, *cells, *ratios]) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="320,1200", help="corpus sizes in files")
    parser.add_argument("--repeat", type=int, default=5, help="runs per cell (default 5)")
    parser.add_argument("--peers", default=",".join(PEERS), help="which peers to try")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--workdir", type=Path, help="where to build (default: a temp folder)")
    parser.add_argument(
        "--before",
        type=Path,
        help="another checkout of brain-pipeline (e.g. main) measured in the same rounds, "
        "as the system 'before'",
    )
    args = parser.parse_args(argv)
    wanted = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = [p for p in wanted if p not in PEERS]
    if unknown:
        parser.error(f"--peers: unknown {unknown}; known: {', '.join(PEERS)}")
    peers, missing = installed_peers(wanted)
    if missing:
        print(f"not installed, left out: {', '.join(missing)} (pip install -e .[bench-peers])")
    base = args.workdir or Path(tempfile.mkdtemp(prefix="bench-peers-"))
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    session = Session(runs=args.repeat).start()
    try:
        for files in sizes:
            print(f"== {files} files", flush=True)
            result = bench_size(session, files, base, args.seed, peers, args.repeat, args.before)
            print_table(result)
        session.finish()
    finally:
        if args.workdir is None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
