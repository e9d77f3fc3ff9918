"""What an idle sensor tick costs: the observation of an unchanged corpus, and automation.

Generates bench_scale.py's synthetic corpus (`--files`, default 70,000), observes it once
(hashing every file, as a first run does), then measures `--ticks` ticks with nothing
changed: `corpus_observation_sensor` itself (a stat per file, no hashing, the two
digests compared with the cursor) and one `automation_sensor` evaluation of every
condition, each in this process on an ephemeral instance. Prints CPU seconds per tick
(process time: what the daemon and code server spend) and the idle CPU per hour at
several intervals. Each tick figure is the median [min-max] of the `--ticks` ticks
(default 5; benchmarks/_figures.py), and a reference unit timed before and after states
the machine's speed.

    python benchmarks/bench_tick.py --files 70000 --ticks 5
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _figures import Figure, Session  # noqa: E402
from bench_scale import generate_corpus  # noqa: E402

INTERVALS = (5, 10, 15, 30, 60)


def measure(files: int, ticks: int, root: Path) -> dict[str, object]:
    import dagster as dg

    from brain_pipeline.definitions import build_definitions

    started = time.perf_counter()
    corpus = generate_corpus(root / "corpus", files, seed=20)
    print(f"  generated {files} files in {time.perf_counter() - started:.1f}s", flush=True)
    config = root / "corpus_config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "corpus": {"path": str(corpus.root), "candidates": []},
                "build_dir": str(root / "build"),
                "embedding": {"provider": "none"},
                "evaluation": {"fixture": str(corpus.fixture)},
                "publish": {"root": str(root / "agent")},
            }
        ),
        encoding="utf-8",
    )
    defs = build_definitions(str(config))
    instance = dg.DagsterInstance.ephemeral()
    sensor = defs.resolve_sensor_def("corpus_observation_sensor")

    def tick(cursor: str | None) -> tuple[str | None, float, float]:
        context = dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs)
        cpu, wall = time.process_time(), time.perf_counter()
        result = sensor(context)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        assert isinstance(result, dg.SensorResult)
        for event in result.asset_events or []:
            instance.report_runless_asset_event(event)  # as the daemon does
        return result.cursor, cpu, wall

    cursor, first_cpu, first_wall = tick(None)
    print(f"  first tick (hashes every file): {first_cpu:.2f} CPU-s, {first_wall:.2f}s", flush=True)
    observe_cpu: list[float] = []
    observe_wall: list[float] = []
    for _ in range(ticks):
        cursor, cpu, wall = tick(cursor)
        observe_cpu.append(cpu)
        observe_wall.append(wall)
    evaluation = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    auto_cpu: list[float] = []
    for _ in range(ticks):
        cpu = time.process_time()
        evaluation = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, cursor=evaluation.cursor
        )
        auto_cpu.append(time.process_time() - cpu)
    per_tick = statistics.median(observe_cpu) + statistics.median(auto_cpu)
    print(f"  observation tick: {Figure.of(observe_cpu).text('{:.3f}', 'CPU-s')}; "
          f"wall {Figure.of(observe_wall).text('{:.3f}', 's')}")
    print(f"  automation evaluation: {Figure.of(auto_cpu).text('{:.3f}', 'CPU-s')}")
    return {
        "files": files,
        "observation_tick_cpu_s": round(statistics.median(observe_cpu), 3),
        "observation_tick_wall_s": round(statistics.median(observe_wall), 3),
        "automation_tick_cpu_s": round(statistics.median(auto_cpu), 3),
        "idle_cpu_s_per_hour": {
            f"{interval}s": round(per_tick * 3600 / interval, 1) for interval in INTERVALS
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=70_000)
    parser.add_argument("--ticks", type=int, default=5)
    parser.add_argument("--workdir", type=Path, help="where to build (default: a temp folder)")
    args = parser.parse_args(argv)
    if not 1 <= args.ticks <= 50:
        parser.error("--ticks must be between 1 and 50")
    session = Session(runs=args.ticks).start()
    root = Path(tempfile.mkdtemp(prefix="bench-tick-", dir=args.workdir))
    try:
        summary = measure(args.files, args.ticks, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(summary))
    session.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
