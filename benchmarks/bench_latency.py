"""Edit -> published latency of event-driven publishing, against a real `dagster dev`.

What it does: copies the sample corpus (examples/curated-content) and writes a
configuration with both sensors on at `--interval` seconds, no embeddings and lenient
evaluation thresholds (what is measured is the automation, not the evaluation). It
builds and publishes once with `brain-pipeline materialize`, then starts `dg dev` (or
`dagster dev`) on 127.0.0.1 in its own process group with its own DAGSTER_HOME, and makes
`--edits` edits. Each edit appends a paragraph carrying a fresh token to one corpus file;
the edit is published when the token appears in the agent's
`<publish root>/src/storage/knowledge-store.json`.

When the next edit is made is random, drawn so that a third of them land right after a
publication (within a second: the case issue 20 loses), a third within one interval of
it and a third later. An edit not published within `--deadline` seconds (default four
intervals plus 90 s) is counted as lost, and the next edit is made anyway (its run
publishes the lost one too, which is not counted as a success).

The server is stopped (SIGTERM to its process group, SIGKILL after 20 s) when the edits
are done, on Ctrl-C and on any error; the work folder is removed unless `--keep`.

    python benchmarks/bench_latency.py --interval 60 --edits 8
    python benchmarks/bench_latency.py --interval 5 --edits 15
    python benchmarks/bench_latency.py --code /path/to/another/checkout   # its code, same driver
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SAMPLE_CORPUS = REPO / "examples" / "curated-content"
SAMPLE_FIXTURE = REPO / "examples" / "retrieval-eval.json"
EDITED_FILES = 4  # edits rotate over this many files of the corpus
_DROPPED_ENV = {"GEMINI_API_KEY", "GOOGLE_API_KEY", "S3_BUCKET_NAME", "AWS_S3_BUCKET"}


@dataclass
class Project:
    root: Path
    corpus: Path
    config: Path
    home: Path
    published: Path
    edited: list[Path] = field(default_factory=list)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def make_project(root: Path, interval: int) -> Project:
    corpus = root / "corpus"
    shutil.copytree(SAMPLE_CORPUS, corpus)
    settings = {
        "corpus": {"path": str(corpus), "candidates": []},
        "build_dir": str(root / "build"),
        "dagster_home": str(root / "home"),
        "embedding": {"provider": "none"},
        "evaluation": {
            "fixture": str(SAMPLE_FIXTURE),
            "thresholds": {
                name: {"min_ndcg_at_10": 0.0, "min_recall_at_10": 0.0, "max_misses": 1000}
                for name in ("bm25", "hybrid", "legacy")
            },
        },
        "publish": {"root": str(root / "agent")},
        "schedule": {
            "enabled": False,
            "sensor_enabled": True,
            "sensor_min_interval_seconds": interval,
        },
    }
    config = root / "corpus_config.yaml"
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    edited = sorted(corpus.rglob("*.md"))[:EDITED_FILES]
    return Project(
        root=root,
        corpus=corpus,
        config=config,
        home=root / "home",
        published=root / "agent" / "src" / "storage" / "knowledge-store.json",
        edited=edited,
    )


def child_env(project: Project, code: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    env["BRAIN_CONFIG"] = str(project.config)
    env["DAGSTER_HOME"] = str(project.home)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
    return env


def code_location_module(code: Path) -> str:
    """The module the checkout's own workspace.yaml loads (layouts differ across versions)."""
    loaded = yaml.safe_load((code / "workspace.yaml").read_text(encoding="utf-8"))
    return str(loaded["load_from"][0]["python_module"]["module_name"])


def write_workspace(project: Project, code: Path) -> Path:
    workspace = project.root / "workspace.yaml"
    entry = {
        "python_module": {
            "module_name": code_location_module(code),
            "working_directory": str(code),
            "location_name": "brain_pipeline",
        }
    }
    workspace.write_text(yaml.safe_dump({"load_from": [entry]}), encoding="utf-8")
    return workspace


def dev_command(workspace: Path, port: int) -> list[str]:
    for program in ("dg", "dagster"):
        path = shutil.which(program)
        if path is not None:
            return [path, "dev", "-w", str(workspace), "-h", "127.0.0.1", "-p", str(port)]
    raise SystemExit("neither `dg` nor `dagster` is installed")


def wait_for_server(port: int, server: subprocess.Popen[bytes], limit: float) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode} before answering")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the server did not answer within {limit:.0f}s")


def stop_group(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's own process group; SIGKILL to it after 20 s."""
    if server.poll() is not None:
        return
    try:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)
    except ProcessLookupError:
        pass


def published_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def next_delay(rng: random.Random, interval: int) -> float:
    """Seconds between a publication and the next edit (see the module docstring)."""
    kind = rng.randrange(3)
    if kind == 0:
        return rng.uniform(0.0, 1.0)
    if kind == 1:
        return rng.uniform(1.0, float(interval))
    return rng.uniform(float(interval), 2.0 * interval)


def edit(project: Project, number: int, token: str) -> None:
    path = project.edited[number % len(project.edited)]
    with path.open("a", encoding="utf-8") as handle:
        handle.write(f"\n\nLatency probe {number} writes the marker {token} into this note.\n")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))
    return ordered[index]


def run(args: argparse.Namespace, root: Path) -> dict[str, object]:
    code = args.code.resolve()
    project = make_project(root, args.interval)
    env = child_env(project, code)
    logs = root / "logs"
    logs.mkdir()
    started = time.monotonic()
    with (logs / "materialize.log").open("wb") as log:
        built = subprocess.run(
            [sys.executable, "-m", "brain_pipeline.cli", "materialize"],
            env=env,
            cwd=root,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=600,
            check=False,
        )
    if built.returncode != 0 or not project.published.exists():
        raise SystemExit(f"the first build failed (see {logs / 'materialize.log'})")
    print(f"  first build and publication: {time.monotonic() - started:.1f}s", flush=True)
    port = free_port()
    command = dev_command(write_workspace(project, code), port)
    rng = random.Random(args.seed)
    latencies: list[float] = []
    lost: list[int] = []
    with (logs / "server.log").open("wb") as log:
        server = subprocess.Popen(
            command,
            env=env,
            cwd=root,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, stopped as one
        )
        try:
            wait_for_server(port, server, limit=180)
            # Let the sensors take their first tick (the baseline observation) and settle.
            time.sleep(args.interval + 10)
            for number in range(args.edits):
                time.sleep(next_delay(rng, args.interval) if number else 0.0)
                token = f"zqx{rng.getrandbits(48):012x}"
                edit(project, number, token)
                made = time.monotonic()
                while time.monotonic() - made < args.deadline:
                    if token in published_text(project.published):
                        latencies.append(time.monotonic() - made)
                        print(
                            f"  edit {number:2d}: published after {latencies[-1]:6.1f}s", flush=True
                        )
                        break
                    if server.poll() is not None:
                        raise SystemExit(f"the server exited with {server.returncode}")
                    time.sleep(0.25)
                else:
                    lost.append(number)
                    print(
                        f"  edit {number:2d}: LOST (not published within {args.deadline:.0f}s)",
                        flush=True,
                    )
        finally:
            stop_group(server)
    return {
        "code": str(code),
        "interval_s": args.interval,
        "edits": args.edits,
        "published": len(latencies),
        "lost": len(lost),
        "median_s": round(statistics.median(latencies), 1) if latencies else None,
        "p95_s": round(percentile(latencies, 0.95), 1) if latencies else None,
        "max_s": round(max(latencies), 1) if latencies else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interval", type=int, default=60, help="sensor interval, seconds")
    parser.add_argument("--edits", type=int, default=10)
    parser.add_argument("--deadline", type=float, help="seconds before an edit counts as lost")
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--code", type=Path, default=REPO, help="checkout whose code to serve")
    parser.add_argument("--workdir", type=Path, help="where to work (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)
    if args.interval < 5 or args.edits < 1 or args.edits > 100:
        parser.error("--interval must be at least 5 and --edits between 1 and 100")
    if args.deadline is None:
        args.deadline = 4.0 * args.interval + 90.0
    root = Path(tempfile.mkdtemp(prefix="bench-latency-", dir=args.workdir))
    print(f"bench_latency: interval {args.interval}s, {args.edits} edits, work folder {root}")
    try:
        summary = run(args, root)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(summary))
    print(
        f"edit -> published at {summary['interval_s']}s: median {summary['median_s']}s, "
        f"p95 {summary['p95_s']}s, lost {summary['lost']} of {summary['edits']}"
    )
    return 0 if summary["lost"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
