"""BM25 on SciFact: our index against the peer `bm25s`, measured alike in one run.

Usage: python benchmarks/bench_bm25.py [PATH_TO_SCIFACT] [--passes N] [--builds N]
                                       [--depths 10,100]

Every row is measured the same way, in this one process:

* Single thread. OMP/OPENBLAS/MKL/BLIS/NUMEXPR/VECLIB_NUM_THREADS are set to 1 below,
  before numpy is imported (the header says whether threadpoolctl could confirm the
  pools; BM25 itself calls no BLAS routine). bm25s answers with `n_threads=0`, its
  in-process map, and its numpy backend (`backend="numpy"`, `backend_selection="numpy"`).
* Index build, cold: from the raw texts, tokenising included (our word memo is cleared
  first); the median of `--builds` builds.
* Queries: the 300 test claims, each from its raw string to its top-k ids (tokenising
  included) at every depth of `--depths`. One warm-up pass, then the median of
  `--passes` passes; the warm-up pass is reported too ("cold q/s"). bm25s is also timed
  answering all claims in one `retrieve` call (its batch API), and the ratio of ours to
  bm25s uses the faster of its two ways.
* bm25s as its documentation recommends for English text: `bm25s.tokenize(texts,
  stopwords="en")` for the corpus and each query, `BM25(method="lucene")` (its default
  scoring, which has our IDF) with our k1=1.2 and b=0.75, `retriever.index(tokens)`,
  `retriever.retrieve(query_tokens, k=depth)`. A second bm25s row is fed our tokenizer's
  terms instead (our de-duplicated query terms), the like-for-like retrieval.

nDCG@10 (gain = qrel score, ideal over min(10, |relevant|)) checks each row found the
same kind of answers. bm25s keeps float32 scores; only positive-scored hits count.
"""

from __future__ import annotations

import os

for _pool in ("OMP", "OPENBLAS", "MKL", "BLIS", "NUMEXPR", "VECLIB_MAXIMUM"):
    os.environ[f"{_pool}_NUM_THREADS"] = "1"  # before numpy is imported (by anything)

import argparse  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

import bm25s  # noqa: E402
import numpy as np  # noqa: E402

from brain_pipeline.retrieval.bm25 import BM25Index  # noqa: E402
from brain_pipeline.retrieval.text import clear_memo, tokenize  # noqa: E402

NDCG_K = 10
DEFAULT_PATH = Path(__file__).resolve().parent.parent / ".." / "shared" / "datasets" / "scifact"


def load_jsonl(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def load_qrels(path: Path) -> dict[str, dict[str, float]]:
    qrels: dict[str, dict[str, float]] = {}
    with path.open(encoding="utf-8") as handle:
        next(handle)
        for line in handle:
            query_id, doc_id, score = line.rstrip("\n").split("\t")
            qrels.setdefault(query_id, {})[doc_id] = float(score)
    return qrels


def ndcg_at_k(ranked: Sequence[str], relevant: dict[str, float], k: int = NDCG_K) -> float:
    dcg = sum(relevant.get(doc, 0.0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal_gains = sorted(relevant.values(), reverse=True)[:k]
    ideal = sum(gain / math.log2(i + 2) for i, gain in enumerate(ideal_gains))
    return dcg / ideal if ideal > 0 else 0.0


def mean_ndcg(rankings: list[list[str]], qrels: list[dict[str, float]]) -> float:
    return float(np.mean([ndcg_at_k(r, q) for r, q in zip(rankings, qrels, strict=True)]))


def thread_pools() -> str:
    """What threadpoolctl sees (when installed): every pool should have 1 thread."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed; *_NUM_THREADS=1 set before numpy was imported"
    pools = [f"{p['internal_api']}={p['num_threads']}" for p in threadpool_info()]
    return "threadpoolctl: " + (", ".join(pools) or "no native pools loaded")


def median_seconds(fn: Callable[[], object], runs: int) -> tuple[float, object]:
    """Median wall time over `runs` calls, and the last result."""
    times, result = [], None
    for _ in range(max(runs, 1)):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


@dataclass
class Row:
    name: str
    build_s: float
    cold_qps: dict[int, float] = field(default_factory=dict)
    warm_qps: dict[int, float] = field(default_factory=dict)
    batch_qps: dict[int, float] = field(default_factory=dict)
    ndcg: float = 0.0

    def best_qps(self, depth: int) -> float:
        return max(self.warm_qps[depth], self.batch_qps.get(depth, 0.0))


def time_queries(
    row: Row,
    answer: Callable[[str, int], list[str]],
    texts: list[str],
    depths: Sequence[int],
    passes: int,
) -> dict[int, list[list[str]]]:
    """Cold (first) pass and the median of `passes` warm passes at each depth."""
    rankings: dict[int, list[list[str]]] = {}
    for depth in depths:
        start = time.perf_counter()
        rankings[depth] = [answer(text, depth) for text in texts]
        row.cold_qps[depth] = len(texts) / (time.perf_counter() - start)
        seconds, _ = median_seconds(lambda d=depth: [answer(t, d) for t in texts], passes)
        row.warm_qps[depth] = len(texts) / seconds
    return rankings


def bench_ours(
    doc_ids: list[str],
    texts: list[str],
    queries: list[str],
    qrels: list[dict[str, float]],
    depths: Sequence[int],
    passes: int,
    builds: int,
) -> Row:
    def build() -> BM25Index:
        clear_memo()  # a cold build: no words remembered from an earlier one
        return BM25Index.build(doc_ids, texts)

    build_s, index = median_seconds(build, builds)
    assert isinstance(index, BM25Index)
    clear_memo()  # the query passes start cold too, as bm25s's do
    row = Row("ours", build_s)

    def answer(text: str, depth: int) -> list[str]:
        return [doc for doc, _ in index.search(text, depth)]

    rankings = time_queries(row, answer, queries, depths, passes)
    row.ndcg = mean_ndcg(rankings[max(depths)], qrels)
    return row


def bench_bm25s(
    name: str,
    doc_ids: list[str],
    texts: list[str],
    queries: list[str],
    qrels: list[dict[str, float]],
    depths: Sequence[int],
    passes: int,
    builds: int,
    our_tokens: bool,
) -> Row:
    def tokens_of(batch: list[str], query: bool) -> list[list[str]]:
        if our_tokens:
            if query:  # the agent de-duplicates query terms
                return [list(dict.fromkeys(tokenize(t))) for t in batch]
            return [tokenize(t) for t in batch]
        tokenized = bm25s.tokenize(batch, stopwords="en", return_ids=False, show_progress=False)
        assert isinstance(tokenized, list)
        return tokenized

    def build() -> bm25s.BM25:
        if our_tokens:
            clear_memo()
        retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene", backend="numpy")
        retriever.index(tokens_of(texts, query=False), show_progress=False)
        return retriever

    build_s, built = median_seconds(build, builds)
    assert isinstance(built, bm25s.BM25)
    retriever: bm25s.BM25 = built
    clear_memo()
    row = Row(name, build_s)

    def hits(docs: np.ndarray, scores: np.ndarray) -> list[str]:
        return [doc_ids[i] for i, s in zip(docs.tolist(), scores.tolist(), strict=True) if s > 0]

    def answer(text: str, depth: int) -> list[str]:
        docs, scores = retriever.retrieve(
            tokens_of([text], query=True), k=depth, show_progress=False, n_threads=0,
            backend_selection="numpy",
        )  # fmt: skip
        return hits(docs[0], scores[0])

    rankings = time_queries(row, answer, queries, depths, passes)

    for depth in depths:

        def batch(d: int = depth) -> list[list[str]]:
            docs, scores = retriever.retrieve(
                tokens_of(queries, query=True), k=d, show_progress=False, n_threads=0,
                backend_selection="numpy",
            )  # fmt: skip
            return [hits(docs[r], scores[r]) for r in range(len(queries))]

        batch()  # warm-up
        seconds, _ = median_seconds(batch, passes)
        row.batch_qps[depth] = len(queries) / seconds
    row.ndcg = mean_ndcg(rankings[max(depths)], qrels)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--passes", type=int, default=5, help="warm passes (median; default 5)")
    parser.add_argument("--builds", type=int, default=3, help="cold builds (median; default 3)")
    parser.add_argument("--depths", default="10,100", help="top-k depths (default 10,100)")
    args = parser.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    logging.getLogger("bm25s").setLevel(logging.ERROR)

    corpus = load_jsonl(args.path / "corpus.jsonl")
    qrels_by_id = load_qrels(args.path / "qrels.tsv")
    judged = [q for q in load_jsonl(args.path / "queries.jsonl") if q["_id"] in qrels_by_id]
    queries = [q["text"] for q in judged]
    qrels = [qrels_by_id[q["_id"]] for q in judged]
    doc_ids = [doc["_id"] for doc in corpus]
    texts = [doc["title"] + " " + doc["text"] for doc in corpus]

    print(
        f"SciFact: {len(doc_ids)} documents, {len(queries)} test queries; bm25s "
        f"{bm25s.__version__} (numpy backend, n_threads=0); numpy {np.__version__}\n"
        f"single thread: {thread_pools()}\n"
        f"build: median of {args.builds} cold builds; queries one at a time, raw string to "
        f"top-k ids: cold = the warm-up pass, warm = median of {args.passes} passes"
    )
    common = (doc_ids, texts, queries, qrels, depths, args.passes, args.builds)
    rows = [
        bench_ours(*common),
        bench_bm25s("bm25s, stopwords=\"en\"", *common, our_tokens=False),
        bench_bm25s("bm25s, our tokenizer", *common, our_tokens=True),
    ]
    heads = "".join(f" {f'cold@{d}':>9} {f'warm@{d}':>9} {f'batch@{d}':>9}" for d in depths)
    print(f"{'':<24} {'build s':>8}{heads} {'nDCG@10':>8}   (q/s)")
    for row in rows:
        cells = "".join(
            f" {row.cold_qps[d]:9.0f} {row.warm_qps[d]:9.0f} "
            + (f"{row.batch_qps[d]:9.0f}" if d in row.batch_qps else f"{'-':>9}")
            for d in depths
        )
        print(f"{row.name:<24} {row.build_s:8.3f}{cells} {row.ndcg:8.4f}")
    ours = rows[0]
    for peer in rows[1:]:
        ratios = ", ".join(
            f"depth {d}: {ours.warm_qps[d] / peer.best_qps(d):.2f}x" for d in depths
        )
        print(
            f"ours / {peer.name} (its faster of loop and batch, warm): {ratios}; "
            f"build {peer.build_s / ours.build_s:.2f}x faster"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
