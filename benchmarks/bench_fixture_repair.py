"""Stale-label repair on the sample corpus: light edits mapped right, heavy ones never applied.

Usage: python benchmarks/bench_fixture_repair.py [--seeds 0 1 2 ...] [--light 20] [--heavy 5]

For each seed, on a fresh copy of examples/curated-content and its 54-query fixture:
ingest, record the chunk history, apply `--light` light edits (typo, re-wrap, one added
sentence, typo + re-wrap) and `--heavy` heavy ones (split, deletion, rewrite with the
same words reordered) to distinct labelled paragraphs chosen by the seed, re-ingest, and
run `propose_for_build` (what `brain-pipeline fixture repair` runs). Reports, per seed:
light edits mapped to exactly the right new id / light, heavy edits wrongly auto-applied
(goal 0), and the time of the proposal. The edits themselves are
brain_pipeline_tests/evaluation/fixture/repair_scenarios.py, the same ones the tests use.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from brain_pipeline.evaluation.fixture.model import load_fixture  # noqa: E402
from brain_pipeline.evaluation.fixture.repair import propose_for_build  # noqa: E402
from brain_pipeline.state.layout import StateLayout  # noqa: E402
from brain_pipeline_tests.evaluation.fixture.repair_scenarios import (  # noqa: E402
    HEAVY_KINDS,
    SampleProject,
    seeded_edits,
)

T0 = datetime(2026, 3, 1, tzinfo=UTC)
T1 = datetime(2026, 3, 2, tzinfo=UTC)


@dataclass
class SeedResult:
    seed: int
    light_ok: int
    heavy_applied: int
    seconds: float
    verdicts: Counter[str]
    light_misses: list[str]


def run_seed(seed: int, n_light: int, n_heavy: int) -> SeedResult:
    with tempfile.TemporaryDirectory() as tmp:
        project = SampleProject.create(Path(tmp))
        before = project.build_store(T0)
        fixture = load_fixture(project.fixture)
        edits = seeded_edits(
            project.corpus, fixture, before, seed=seed, n_light=n_light, n_heavy=n_heavy
        )
        after = project.build_store(T1)
        start = time.perf_counter()
        proposal = propose_for_build(StateLayout.of(project.build), after, fixture)
        seconds = time.perf_counter() - start
    rows = {r.old_id: r for r in proposal.rows}
    light_ok = 0
    heavy_applied = 0
    light_misses: list[str] = []
    verdicts: Counter[str] = Counter()
    for edit in edits:
        row = rows.get(edit.old_id)
        if row is None:
            raise SystemExit(f"seed {seed}: edited label {edit.old_id} is not stale")
        verdicts[f"{edit.kind}:{row.verdict}"] += 1
        if edit.light:
            if row.applies and row.proposed_id == edit.expected:
                light_ok += 1
            else:
                light_misses.append(f"{edit.kind} {edit.old_id}: {row.verdict} ({row.reason})")
        elif row.applies:
            heavy_applied += 1
    return SeedResult(seed, light_ok, heavy_applied, seconds, verdicts, light_misses)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--light", type=int, default=20)
    parser.add_argument("--heavy", type=int, default=5)
    args = parser.parse_args()
    total_ok = total_bad = 0
    print(f"{'seed':>4}  light repaired  heavy auto-applied  proposal s")
    heavy_verdicts: Counter[str] = Counter()
    for seed in args.seeds:
        result = run_seed(seed, args.light, args.heavy)
        total_ok += result.light_ok
        total_bad += result.heavy_applied
        print(
            f"{seed:>4}  {result.light_ok:>8}/{args.light:<5}  "
            f"{result.heavy_applied:>11}/{args.heavy:<6}  {result.seconds:10.3f}"
        )
        for miss in result.light_misses:
            print(f"      missed {miss}")
        heavy_verdicts.update(
            {k: v for k, v in result.verdicts.items() if k.split(":")[0] in HEAVY_KINDS}
        )
    n = len(args.seeds)
    print(
        f"total {total_ok}/{args.light * n} light edits repaired correctly, "
        f"{total_bad}/{args.heavy * n} heavy edits wrongly auto-applied"
    )
    print("heavy verdicts: " + ", ".join(f"{k} x{v}" for k, v in sorted(heavy_verdicts.items())))
    return 0 if total_bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
