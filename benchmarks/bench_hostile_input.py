"""Memory and output size of the ingest on roadmaps built to multiply (issue 36).

A roadmap whose `title` is an array nested N deep is copied, indented one level more per
level, into the heading of every topic's chunk: the original ingest turned 5 KB into a
100 MB knowledge-store.json, and 800 KB into more memory than the host had. The ingest
now refuses any file whose chunks would take more than 32 x its bytes + 256 KiB of store
before building them (`corpus/junk.py`), and does not build what lies deeper than
JavaScript could convert (`corpus/chunking.py`).

For each corpus this runs `brain-pipeline chunk CORPUS -o OUT` (and, for two of them,
`brain-pipeline materialize --select group:ingest` with a throw-away config and Dagster
home) in a subprocess and prints the peak resident memory of that subprocess (`wait4`'s
`ru_maxrss`), the wall time and the size of the store written. The corpora: the sample
corpus (`examples/curated-content`), then the sample corpus plus each hostile roadmap of
`brain_pipeline_tests/corpus/hostile.py` (700 deep / 100 topics, about 5 KB; 3,000 deep /
1,500 topics, about 55 KB; 200,000 deep / 11,000 topics, about 760 KB; and a flat
100,000-character title on 3,000 topics, about 200 KB, which only the output bound
catches), then plus all four. The peer: the original's rule (no bound) on the 700-deep
file alone, in a subprocess of its own; the others are not run that way (tens of GB).

Usage: python benchmarks/bench_hostile_input.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _figures import Figure, Session  # noqa: E402

from brain_pipeline_tests.corpus.hostile import (  # noqa: E402
    HOSTILE_ROADMAPS,
    LONG_TITLE_ROADMAP,
    deep_title_roadmap,
    hostile_roadmaps,
)

SAMPLE = REPO / "examples" / "curated-content"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}

# The original's rule: no output bound.
UNBOUNDED = """
import sys
from brain_pipeline.corpus.chunking import chunk_roadmap
from brain_pipeline.corpus.store import serialize_store
text = open(sys.argv[1], encoding="utf-8").read()
print(len(serialize_store(chunk_roadmap(text, "hostile", "hostile/x.json").chunks)))
"""


def measured_run(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """Run `argv`; its peak RSS in MB (this child only), wall seconds, and its stdout."""
    started = time.perf_counter()
    child = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert child.stdout is not None
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if child.returncode != 0:
        raise SystemExit(f"{argv[:4]} exited {child.returncode}")
    return usage.ru_maxrss / 1024.0, wall, out


def build_corpora(base: Path) -> dict[str, Path]:
    """The sample corpus alone, with each hostile roadmap, and with all four."""
    corpora: dict[str, Path] = {}

    texts = hostile_roadmaps()

    def corpus(name: str, hostile: list[str]) -> None:
        root = base / name
        shutil.copytree(SAMPLE, root)
        folder = root / "hostile" / "roadmaps"
        folder.mkdir(parents=True)
        (root / "hostile" / "notes.md").write_text("A note long enough to be kept as a chunk.")
        for file_name in hostile:
            (folder / file_name).write_text(texts[file_name], encoding="utf-8")
        corpora[name] = root

    corpus("sample", [])
    for file_name in texts:
        corpus(f"sample+{file_name.removeprefix('formatted-').removesuffix('.json')}", [file_name])
    corpus("sample+all-four", list(texts))
    return corpora


def corpus_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    session = Session(runs=args.runs).start()
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        base = Path(tmp)
        corpora = build_corpora(base)
        for name, depth, topics in HOSTILE_ROADMAPS:
            size = len(deep_title_roadmap(depth, topics).encode())
            print(f"{name}: {size:,} bytes, title {depth:,} deep, {topics:,} topics")
        name, length, topics = LONG_TITLE_ROADMAP
        size = len(hostile_roadmaps()[name].encode())
        print(f"{name}: {size:,} bytes, title a {length:,}-character string, {topics:,} topics")

        print("\nbrain-pipeline chunk CORPUS -o OUT (subprocess):")
        for name, root in corpora.items():
            out = base / f"{name}.json"
            argv = [sys.executable, "-m", "brain_pipeline.cli", "chunk", str(root), "-o", str(out)]
            report(session, name, root, lambda a=argv: measured_run(a, base, ENV), out)

        print("\nbrain-pipeline materialize --select group:ingest (subprocess, provider none):")
        for name in ("sample", "sample+all-four"):
            root = corpora[name]
            project = base / f"project-{name}"
            project.mkdir()
            config = project / "corpus_config.yaml"
            config.write_text(
                f"corpus:\n  path: {root}\nbuild_dir: {project / 'build'}\n"
                "embedding:\n  provider: none\n",
                encoding="utf-8",
            )
            env = {**ENV, "BRAIN_CONFIG": str(config), "DAGSTER_HOME": str(project / "dh")}
            argv = [sys.executable, "-m", "brain_pipeline.cli", "materialize"]
            argv += ["--select", "group:ingest"]
            store = project / "build" / "knowledge-store.json"
            run = lambda a=argv, e=env, p=project: measured_run(a, p, e)  # noqa: E731
            report(session, name, root, run, store)

        print("\npeer, the original's rule (no bound), on the 700-deep file alone:")
        lone = base / "deep-700.json"
        lone.write_text(deep_title_roadmap(*HOSTILE_ROADMAPS[0][1:]), encoding="utf-8")
        argv = [sys.executable, "-c", UNBOUNDED, str(lone)]
        samples = [measured_run(argv, base, ENV) for _ in range(args.runs)]
        rss = Figure.of(s[0] for s in samples)
        print(
            f"  {lone.stat().st_size:,} bytes in -> {int(samples[0][2]):,} bytes of store; "
            f"peak RSS {rss.text('{:.0f}', 'MB')}"
        )
    session.finish()
    return 0


def report(
    session: Session,
    name: str,
    root: Path,
    run: Callable[[], tuple[float, float, str]],
    store: Path,
) -> None:
    samples = []
    for _ in range(session.runs):
        samples.append(run())
        session.note_reference()
    rss = Figure.of(s[0] for s in samples)
    wall = Figure.of(s[1] for s in samples)
    print(
        f"  {name:<20} {corpus_bytes(root):>9,} bytes in -> {store.stat().st_size:>9,} bytes "
        f"out; peak RSS {rss.text('{:.0f}', 'MB')}; {wall.text('{:.2f}', 's')}",
        flush=True,
    )


if __name__ == "__main__":
    raise SystemExit(main())
