"""Peak memory of publishing a large store to the agent's folders.

Builds (once, in a child process) a synthetic store of N chunks with
`bench_search.generate` and an embeddings.bin of the agent's query model (N × `--dim`
int8 vectors), then runs `steps.publish.publish_to_agent` as a fresh process, twice:

  first      an empty publish root: every file is staged and committed
  unchanged  the same build again: everything is found in place

Each run is forced (no evaluation is needed to measure publishing) and prints wall
seconds and its peak RSS (`ru_maxrss` of the child, from wait4, so runs cannot blur
into each other). The child also checks that the published files are byte-identical
to the build's. The pair is repeated `--repeat` times (default 5) into a fresh publish
root, and each figure is printed as median [min-max] (benchmarks/_figures.py), with a
reference unit timed between the repeats to state the machine's speed.

Usage::

    python benchmarks/bench_publish.py --chunks 200000 --workdir /tmp/bench-publish
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from _figures import DEFAULT_RUNS, Figure, Session

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
AGENT_MODEL = "gemini-embedding-001"

CHILD_PREPARE = """
import sys
from pathlib import Path
import numpy as np
sys.path.insert(0, sys.argv[4])
from bench_search import generate
from brain_pipeline.corpus.store import serialize_store
from brain_pipeline.retrieval.vectors import encode_embeddings
build = Path(sys.argv[1]); n = int(sys.argv[2]); dim = int(sys.argv[3])
build.mkdir(parents=True, exist_ok=True)
chunks = generate(n, 8)
(build / "knowledge-store.json").write_bytes(serialize_store(chunks))
rng = np.random.default_rng(1)
vectors = rng.integers(-127, 128, size=(len(chunks), dim), dtype=np.int8)
(build / "embeddings.bin").write_bytes(
    encode_embeddings(sys.argv[5], [c.id for c in chunks], vectors)
)
print(len(chunks))
"""

CHILD_PUBLISH = """
import sys, time
from pathlib import Path
from brain_pipeline.config import BrainConfig, PublishSettings
from brain_pipeline.steps.publish import publish_to_agent
from brain_pipeline_tests.steps.handed import build_of

class Log:
    def info(self, msg: str) -> None: pass
    def warning(self, msg: str) -> None: pass

build, root = Path(sys.argv[1]), Path(sys.argv[2])
cfg = BrainConfig(build_dir=build, publish=PublishSettings(root=root))
t0 = time.perf_counter()
result = publish_to_agent(cfg, build_of(cfg), force=True, run_id="bench", log=Log())
wall = time.perf_counter() - t0
src = root / "src" / "storage"
for name in ("knowledge-store.json", "embeddings.bin"):
    a, b = open(build / name, "rb"), open(src / name, "rb")
    while True:
        x, y = a.read(1 << 20), b.read(1 << 20)
        assert x == y, name + " differs from the build's"
        if not x:
            break
print(f"{result.metadata['status']}\\t{wall:.2f}")
"""


def run_child(code: str, args: list[str]) -> tuple[str, int]:
    """Run a child Python; return its stdout and peak RSS in KiB (wait4)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(HERE)]))
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, env=env, text=True
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"child failed ({proc.returncode})")
    return out.strip(), int(usage.ru_maxrss)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bench-publish"))
    parser.add_argument("--repeat", type=int, default=DEFAULT_RUNS, help="repeats (median)")
    args = parser.parse_args(argv)
    session = Session(runs=args.repeat).start()
    build = args.workdir / f"build-{args.chunks}-{args.dim}"
    if not (build / "embeddings.bin").exists():
        t0 = time.perf_counter()
        out, _ = run_child(
            CHILD_PREPARE, [str(build), str(args.chunks), str(args.dim), str(HERE), AGENT_MODEL]
        )
        print(f"generated {out} chunks in {time.perf_counter() - t0:.0f} s")
    store_mb = (build / "knowledge-store.json").stat().st_size / 1e6
    vectors_mb = (build / "embeddings.bin").stat().st_size / 1e6
    print(f"store {store_mb:.1f} MB, embeddings.bin {vectors_mb:.1f} MB")
    # the store view's sidecar index is built once, outside the measured runs
    # (the knowledge_store step leaves it in a real build directory)
    run_child(
        "import sys; from pathlib import Path; "
        "from brain_pipeline.corpus.store_reader import open_store_view; "
        "from brain_pipeline.state.layout import StateLayout; "
        "l = StateLayout.of(sys.argv[1]); print(open_store_view(l.store_file, l).sha256)",
        [str(build)],
    )
    root = args.workdir / "agent"
    print(f"{'run':10} {'status':9} {'wall s':>7} {'peak RSS MB':>12}")
    walls: dict[str, list[float]] = {"first": [], "unchanged": []}
    peaks: dict[str, list[float]] = {"first": [], "unchanged": []}
    for _ in range(max(args.repeat, 1)):
        if root.exists():
            subprocess.run(["rm", "-rf", str(root)], check=True)
        root.mkdir(parents=True)
        for name in ("first", "unchanged"):
            out, rss = run_child(CHILD_PUBLISH, [str(build), str(root)])
            status, wall = out.splitlines()[-1].split("\t")
            print(f"{name:10} {status:9} {float(wall):7.2f} {rss / 1024:12.1f}", flush=True)
            walls[name].append(float(wall))
            peaks[name].append(rss / 1024)
        session.note_reference()
    print("summary, median [min-max] over the repeats:")
    for name in walls:
        print(
            f"  {name:10} wall {Figure.of(walls[name]).text('{:.2f}', 's')}; "
            f"peak RSS {Figure.of(peaks[name]).text('{:.1f}', 'MB')}"
        )
    session.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
