"""How much damage the publish gate sees: labelled fixture alone vs with the known-item check.

    python benchmarks/bench_gate_power.py                  # 1,200 files (~19,000 chunks), 5 repeats
    python benchmarks/bench_gate_power.py --files 1200 --repeat 10

One synthetic corpus (bench_scale.py's generator: 4 areas, Zipf vocabulary) with a
first-hour fixture of 20 labelled queries (5 per area, bench_scale's rule: rare words of
one paragraph), BM25 floors 0.05 below the figures of the clean corpus and
`on_regression: block` (the shipped defaults otherwise, known items included). The clean
store is evaluated and published: that records both baselines. Then each scenario is
applied to a fresh copy of the corpus with its own seed, the store rebuilt and evaluated
in-process by `evaluation.service.evaluate_store_dir` (the blocking check's code), from
the published state each time. A run is *blocked by the labels* when a failure other than
a known-item one is in the verdict (thresholds, stale labels, regressions), *blocked with
known items* when the verdict is ERROR at all.

Damage (one area chosen by the seed):

  delete 30%     30% of the area's files deleted
  fuse 30%       30% of its files with every paragraph break lost (a converter fault)
  garble 30%     30% of its files with the letters of every word shuffled
  decoys 20%     for 20% of its paragraphs, twelve new paragraphs repeating the opening
                 sentence three times (a scraped page flooding the area)

Benign (what a maintainer does on an ordinary day):

  edit 5         five paragraphs rewritten, anywhere
  typos 20       a typo fixed in twenty paragraphs (two letters swapped)
  delete 2       two files deleted
  add 10         ten new files

Detection (damage) and false-alarm (benign) rates are over `--repeat` seeds. Last, a sweep
of decoy floods of growing size in one area gives the smallest flood the check detects in
at least 95% of the seeds, and, over all sweep runs, the detection rate by the found@10
drop measured on the area's known items. "Vectors of another model" is not run: this
benchmark is lexical (embedding provider none); such vectors are refused before the
evaluation (publish.agent_query_model).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import bench_scale
from _figures import Figure, Session

from brain_pipeline.config import BrainConfig, load_config
from brain_pipeline.corpus import store_reader
from brain_pipeline.corpus.file_chunks import ingest_corpus
from brain_pipeline.corpus.store import serialize_store
from brain_pipeline.evaluation import eval_record
from brain_pipeline.evaluation.service import (
    EvaluationOutcome,
    evaluate_store_dir,
    judgement_memory,
    record_as_baseline,
)
from brain_pipeline.state.layout import StateLayout

AREAS = [f"area-{i}" for i in range(bench_scale.AREAS)]
Scenario = Callable[[Path, random.Random, bench_scale.TextMaker], None]


def _files(root: Path, area: str) -> list[Path]:
    return sorted((root / area).rglob("*.md"))


def _paragraphs(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").rstrip("\n").split("\n\n")


def _write(path: Path, paragraphs: list[str]) -> None:
    path.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")


def _area(rng: random.Random) -> str:
    return rng.choice(AREAS)


def delete_share(share: float) -> Scenario:
    def apply(root: Path, rng: random.Random, _: bench_scale.TextMaker) -> None:
        files = _files(root, _area(rng))
        for path in rng.sample(files, round(share * len(files))):
            path.unlink()

    return apply


def fuse_share(share: float) -> Scenario:
    def apply(root: Path, rng: random.Random, _: bench_scale.TextMaker) -> None:
        files = _files(root, _area(rng))
        for path in rng.sample(files, round(share * len(files))):
            path.write_text("\n".join(_paragraphs(path)) + "\n", encoding="utf-8")

    return apply


def _shuffle_word(word: str, rng: random.Random) -> str:
    letters = list(word)
    rng.shuffle(letters)
    return "".join(letters)


def garble_share(share: float) -> Scenario:
    def apply(root: Path, rng: random.Random, _: bench_scale.TextMaker) -> None:
        files = _files(root, _area(rng))
        for path in rng.sample(files, round(share * len(files))):
            paragraphs = _paragraphs(path)
            garbled = [
                re.sub(r"[a-z]{3,}", lambda m: _shuffle_word(m.group(0), rng), p)
                for p in paragraphs[1:]
            ]
            _write(path, paragraphs[:1] + garbled)

    return apply


def decoy_share(share: float) -> Scenario:
    def apply(root: Path, rng: random.Random, _: bench_scale.TextMaker) -> None:
        area = _area(rng)
        bodies = [p for path in _files(root, area) for p in _paragraphs(path)[1:]]
        decoys = []
        for n, paragraph in enumerate(rng.sample(bodies, round(share * len(bodies)))):
            opening = re.split(r"(?<=[.?!])\s", paragraph)[0]
            decoys.extend(f"{opening} {opening} {opening} (copy {n}.{k})" for k in range(COPIES))
        folder = root / area / "scraped"
        folder.mkdir(exist_ok=True)
        for start in range(0, len(decoys), 50):
            _write(folder / f"page-{start // 50:04d}.md", decoys[start : start + 50])

    return apply


def edit_paragraphs(count: int) -> Scenario:
    def apply(root: Path, rng: random.Random, text: bench_scale.TextMaker) -> None:
        files = [p for area in AREAS for p in _files(root, area)]
        for path in rng.sample(files, count):
            paragraphs = _paragraphs(path)
            paragraphs[rng.randrange(1, len(paragraphs))] = text.paragraph()
            _write(path, paragraphs)

    return apply


def typo_paragraphs(count: int) -> Scenario:
    def apply(root: Path, rng: random.Random, _: bench_scale.TextMaker) -> None:
        files = [p for area in AREAS for p in _files(root, area)]
        for path in rng.sample(files, count):
            paragraphs = _paragraphs(path)
            i = rng.randrange(1, len(paragraphs))
            words = paragraphs[i].split(" ")
            j = max(range(len(words)), key=lambda k: len(words[k]))
            w = words[j]
            words[j] = w[:1] + w[2:3] + w[1:2] + w[3:] if len(w) > 3 else w
            paragraphs[i] = " ".join(words)
            _write(path, paragraphs)

    return apply


def delete_files(count: int) -> Scenario:
    def apply(root: Path, rng: random.Random, _: bench_scale.TextMaker) -> None:
        files = [p for area in AREAS for p in _files(root, area)]
        for path in rng.sample(files, count):
            path.unlink()

    return apply


def add_files(count: int) -> Scenario:
    def apply(root: Path, rng: random.Random, text: bench_scale.TextMaker) -> None:
        for n in range(count):
            folder = root / rng.choice(AREAS) / "new"
            folder.mkdir(exist_ok=True)
            body = [text.paragraph() for _ in range(rng.randint(11, 19))]
            _write(folder / f"new-{n:03d}.md", [text.heading(90_000 + n), *body])

    return apply


DAMAGE: dict[str, Scenario] = {
    "delete 30%": delete_share(0.30),
    "fuse 30%": fuse_share(0.30),
    "garble 30%": garble_share(0.30),
    "decoys 20%": decoy_share(0.20),
}
BENIGN: dict[str, Scenario] = {
    "edit 5": edit_paragraphs(5),
    "typos 20": typo_paragraphs(20),
    "delete 2": delete_files(2),
    "add 10": add_files(10),
}
SWEEP = (0.02, 0.05, 0.10, 0.15, 0.20, 0.30)
COPIES = 12
"""Decoys per flooded paragraph: enough to push it out of a top 10."""


@dataclass(frozen=True)
class Result:
    labelled: bool
    known: bool
    combined: bool
    drop: float
    """Largest found@10 drop of an area (items whose text remains)."""


class Bench:
    def __init__(self, root: Path, files: int, seed: int) -> None:
        bench_scale.QUERIES_PER_AREA = 5  # a first hour of labelling: 20 queries
        self.root = root
        self.pristine = bench_scale.generate_corpus(root / "pristine", files, seed)
        self.build = root / "build"
        self.build.mkdir()
        self.config = root / "corpus_config.yaml"
        self.layout = StateLayout.of(self.build)
        self.seed = seed
        self._configure("")
        self._store(self.pristine.root)
        clean = evaluate_store_dir(self.cfg, self.build)
        floor = clean.verdict.thresholds  # none yet: floors from the clean figures
        assert not floor and clean.report is not None
        ndcg = clean.flat_metrics["bm25.ndcg_at_10"]
        recall = clean.flat_metrics["bm25.recall_at_10"]
        self.floors = (round(ndcg - 0.05, 3), round(recall - 0.05, 3))
        self._configure(
            "  thresholds:\n    bm25:\n"
            f"      min_ndcg_at_10: {self.floors[0]}\n      min_recall_at_10: {self.floors[1]}\n"
        )
        published = evaluate_store_dir(self.cfg, self.build)
        assert published.verdict.severity == "PASS", published.verdict.line()
        record = eval_record.lookup(judgement_memory(self.cfg), str(published.record_key))
        assert record is not None
        record_as_baseline(self.cfg, record, kind="published")
        self.state = root / "published-state"
        shutil.copytree(self.layout.state_dir, self.state)
        self.chunks = published.report.n_chunks if published.report else 0

    def _configure(self, thresholds: str) -> None:
        self.config.write_text(
            f"build_dir: {self.build}\nembedding:\n  provider: none\n"
            f"evaluation:\n  fixture: {self.pristine.fixture}\n{thresholds}"
        )
        self.cfg: BrainConfig = load_config(self.config, env={})

    def _store(self, corpus: Path) -> None:
        chunks = ingest_corpus(corpus).chunks
        (self.build / "knowledge-store.json").write_bytes(serialize_store(chunks))
        with store_reader._VIEWS_LOCK:  # a new process would not hold the old view
            store_reader._VIEWS.clear()

    def run(self, scenario: Scenario, seed: int) -> Result:
        corpus = self.root / "corpus"
        shutil.rmtree(corpus, ignore_errors=True)
        shutil.copytree(self.pristine.root, corpus)
        rng = random.Random(seed)
        scenario(corpus, rng, bench_scale.TextMaker(seed + 1))
        shutil.rmtree(self.layout.state_dir)
        shutil.copytree(self.state, self.layout.state_dir)
        self._store(corpus)
        outcome = evaluate_store_dir(self.cfg, self.build)
        return classify(outcome)


def classify(outcome: EvaluationOutcome) -> Result:
    verdict = outcome.verdict
    labelled = any(not f.startswith("known items:") for f in verdict.failures)
    known = verdict.known_items
    drop = max((-a.change for a in known.areas), default=0.0) if known is not None else 0.0
    blocked_by_known = bool(known is not None and known.failures)
    return Result(labelled, blocked_by_known, verdict.severity == "ERROR",
                  drop if drop > 0 else 0.0)  # never "-0.000"


def rate(results: list[Result], attribute: str) -> str:
    hits = sum(1 for r in results if getattr(r, attribute))
    return f"{hits}/{len(results)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--sweep-repeat", type=int, default=20)
    args = parser.parse_args(argv)
    session = Session(runs=args.repeat).start()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-gate-power-") as tmp:
        bench = Bench(Path(tmp), args.files, args.seed)
        print(
            f"corpus: {args.files:,} files, {bench.chunks:,} chunks in {len(AREAS)} areas; "
            f"20 labelled queries, bm25 floors nDCG@10 {bench.floors[0]}, recall@10 "
            f"{bench.floors[1]}; known items {bench.cfg.evaluation.known_items.sample_per_area}"
            " per area"
        )
        print(f"{'scenario':<12} {'kind':<7} {'labels alone':>13} {'known items alone':>18} "
              f"{'labels + known items':>21}  largest area found@10 drop")
        for kind, scenarios in (("damage", DAMAGE), ("benign", BENIGN)):
            for name, scenario in scenarios.items():
                results = [bench.run(scenario, args.seed * 1000 + r) for r in range(args.repeat)]
                session.note_reference()
                drops = Figure.of(r.drop for r in results)
                print(f"{name:<12} {kind:<7} {rate(results, 'labelled'):>13} "
                      f"{rate(results, 'known'):>18} {rate(results, 'combined'):>21}  "
                      f"{drops.text('{:.3f}')}", flush=True)
        print(f"decoy sweep ({args.sweep_repeat} seeds each): share of one area's paragraphs "
              "flooded -> detected by the known-item check, found@10 drop")
        smallest = None
        swept: list[Result] = []
        for share in SWEEP:
            results = [
                bench.run(decoy_share(share), 77_000 + r) for r in range(args.sweep_repeat)
            ]
            swept.extend(results)
            session.note_reference()
            detected = sum(1 for r in results if r.known)
            drops = [r.drop for r in results]
            print(f"  {share:>5.0%}  detected {detected}/{len(results)}  drop median "
                  f"{statistics.median(drops):.3f} [{min(drops):.3f}-{max(drops):.3f}]",
                  flush=True)
            if smallest is None and detected >= 0.95 * len(results):
                smallest = (share, statistics.median(drops), min(drops))
        if smallest is not None:
            print(f"smallest flood detected in >= 95% of seeds: {smallest[0]:.0%} of the area's "
                  f"paragraphs, a found@10 drop of {smallest[1]:.3f} (median; least "
                  f"{smallest[2]:.3f})")
        print("by the drop measured on the area's known items (all sweep runs):")
        for floor in (0.05, 0.075, 0.10, 0.125, 0.15, 0.20):
            above = [r for r in swept if r.drop >= floor - 1e-9]
            if above:
                caught = sum(1 for r in above if r.known)
                print(f"  drop >= {floor:.3f}: detected {caught}/{len(above)}")
        print(json.dumps({"seconds": round(time.perf_counter() - started, 1)}))
    session.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
