"""BM25 on SciFact: our index against the peer `bm25s`, measured alike in one run.

Usage: python benchmarks/bench_bm25.py [PATH_TO_SCIFACT] [--passes N] [--builds N]
                                       [--depths 10,100]

Every row is measured the same way, in this one process:

* Single thread. OMP/OPENBLAS/MKL/BLIS/NUMEXPR/VECLIB_NUM_THREADS are set to 1 below,
  before numpy is imported (the header says whether threadpoolctl could confirm the
  pools; BM25 itself calls no BLAS routine). bm25s answers with `n_threads=0`, its
  in-process map, and its numpy backend (`backend="numpy"`, `backend_selection="numpy"`).
* Index build, cold: from the raw texts, tokenising included (our word memo is cleared
  first); the median and range of `--builds` builds (default 5).
* Queries: the 300 test claims, each from its raw string to its top-k ids (tokenising
  included) at every depth of `--depths`. One warm-up pass, then the median of
  `--passes` passes, the rows taking turns within each round so that a change of load on
  a shared machine hits them alike; the warm-up pass is reported too ("cold"; the word
  memo of our tokenizer is cleared before it). bm25s is also timed
  answering all claims in one `retrieve` call (its batch API); ours is compared with its
  one-at-a-time loop and, in brackets, with the faster of its loop and its batch.
* bm25s as its documentation recommends for English text: `bm25s.tokenize(texts,
  stopwords="en")` for the corpus and each query, `BM25(method="lucene")` (its default
  scoring, which has our IDF) with our k1=1.2 and b=0.75, `retriever.index(tokens)`,
  `retriever.retrieve(query_tokens, k=depth)`. A second bm25s row is fed our tokenizer's
  terms instead (our de-duplicated query terms), the like-for-like retrieval.
  bm25s's optional extras (PyStemmer, the numba backend) are not used; the output
  says whether numba is installed.
* Figures are printed as median [min-max] over the rounds (benchmarks/_figures.py), and
  the ratios are taken round by round before their median; a reference unit timed
  between the rounds states the machine's speed.

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
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import bm25s  # noqa: E402
import numpy as np  # noqa: E402
from _figures import DEFAULT_RUNS, Figure, Session, ratio  # noqa: E402

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


def _has_numba() -> bool:
    """Whether bm25s could use its optional numba backend here (not used: numpy rows)."""
    import importlib.util

    return importlib.util.find_spec("numba") is not None


Answer = Callable[[str, int], list[str]]
Batch = Callable[[list[str], int], list[list[str]]]


@dataclass
class Peer:
    """One row: how to build it (cold), and how it answers one query or a batch."""

    name: str
    build: Callable[[], tuple[Answer, Batch | None]]
    build_s: list[float] = field(default_factory=list)
    answer: Answer | None = None
    batch: Batch | None = None
    cold_qps: dict[int, float] = field(default_factory=dict)
    loop_s: dict[int, list[float]] = field(default_factory=dict)
    batch_s: dict[int, list[float]] = field(default_factory=dict)
    rankings: dict[int, list[list[str]]] = field(default_factory=dict)

    def warm_qps(self, depth: int, n: int) -> Figure:
        """Queries per second of each warm one-at-a-time pass."""
        return Figure.of(self.loop_s[depth]).map(lambda seconds: n / seconds)

    def batch_qps(self, depth: int, n: int) -> Figure | None:
        """Queries per second of each batch call (all queries in one call), if any."""
        times = self.batch_s.get(depth)
        return Figure.of(times).map(lambda seconds: n / seconds) if times else None


def timed_loop(answer: Answer, queries: list[str], depth: int) -> tuple[float, list[list[str]]]:
    """Seconds to answer `queries` one at a time, and the answers."""
    start = time.perf_counter()
    ranked = [answer(q, depth) for q in queries]
    return time.perf_counter() - start, ranked


def measure(
    peers: list[Peer], queries: list[str], depths: Sequence[int], args: Any, session: Session
) -> None:
    """Builds, then per depth a cold pass and `passes` warm rounds, the peers taking turns
    within each round (so a change of load on the shared machine hits every row alike);
    one reference unit is timed after every round."""
    for _ in range(max(args.builds, 1)):
        for peer in peers:
            clear_memo()  # a cold build: no words remembered from an earlier one
            start = time.perf_counter()
            peer.answer, peer.batch = peer.build()
            peer.build_s.append(time.perf_counter() - start)
        session.note_reference()
    n = len(queries)
    for depth in depths:
        for peer in peers:
            assert peer.answer is not None
            clear_memo()  # the first pass starts from nothing remembered, for every row
            seconds, peer.rankings[depth] = timed_loop(peer.answer, queries, depth)
            peer.cold_qps[depth] = n / seconds
            if peer.batch is not None:
                peer.batch(queries, depth)  # its warm-up
        for _ in range(max(args.passes, 1)):
            for peer in peers:
                assert peer.answer is not None
                seconds, _ = timed_loop(peer.answer, queries, depth)
                peer.loop_s.setdefault(depth, []).append(seconds)
                if peer.batch is not None:
                    start = time.perf_counter()
                    peer.batch(queries, depth)
                    peer.batch_s.setdefault(depth, []).append(time.perf_counter() - start)
            session.note_reference()


def ours(doc_ids: list[str], texts: list[str]) -> Peer:
    def build() -> tuple[Answer, Batch | None]:
        index = BM25Index.build(doc_ids, texts)

        def answer(text: str, depth: int) -> list[str]:
            return [doc for doc, _ in index.search(text, depth)]

        return answer, None

    return Peer("ours", build)


def bm25s_peer(name: str, doc_ids: list[str], texts: list[str], our_tokens: bool) -> Peer:
    def tokens_of(batch: list[str], query: bool) -> list[list[str]]:
        if our_tokens:
            if query:  # the agent de-duplicates query terms
                return [list(dict.fromkeys(tokenize(t))) for t in batch]
            return [tokenize(t) for t in batch]
        tokenized = bm25s.tokenize(batch, stopwords="en", return_ids=False, show_progress=False)
        assert isinstance(tokenized, list)
        return tokenized

    def hits(docs: np.ndarray, scores: np.ndarray) -> list[str]:
        return [doc_ids[i] for i, s in zip(docs.tolist(), scores.tolist(), strict=True) if s > 0]

    def build() -> tuple[Answer, Batch | None]:
        retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene", backend="numpy")
        retriever.index(tokens_of(texts, query=False), show_progress=False)

        def retrieve(batch: list[str], depth: int) -> list[list[str]]:
            docs, scores = retriever.retrieve(
                tokens_of(batch, query=True), k=depth, show_progress=False, n_threads=0,
                backend_selection="numpy",
            )  # fmt: skip
            return [hits(docs[r], scores[r]) for r in range(len(batch))]

        def answer(text: str, depth: int) -> list[str]:
            return retrieve([text], depth)[0]

        return answer, retrieve

    return Peer(name, build)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--passes", type=int, default=DEFAULT_RUNS,
                        help=f"warm passes (median; default {DEFAULT_RUNS})")
    parser.add_argument("--builds", type=int, default=DEFAULT_RUNS,
                        help=f"cold builds (median; default {DEFAULT_RUNS})")
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

    session = Session(runs=args.passes).start()
    print(
        f"SciFact: {len(doc_ids)} documents, {len(queries)} test queries; bm25s "
        f"{bm25s.__version__} (numpy backend, n_threads=0); numpy {np.__version__}\n"
        f"single thread: {thread_pools()}\n"
        f"build: median of {args.builds} cold builds; queries one at a time, raw string to "
        f"top-k ids: cold = the warm-up pass, warm = median of {args.passes} passes; "
        "the rows take turns in every round\n"
        'peer configuration: bm25s.tokenize(texts, stopwords="en") for corpus and queries; '
        'BM25(method="lucene", k1=1.2, b=0.75, backend="numpy"); index(tokens); '
        'retrieve(query_tokens, k=depth, n_threads=0, backend_selection="numpy") after a '
        "warm-up pass; no PyStemmer (optional in bm25s; the row fed our tokenizer gets our "
        "plural stemming); numba backend not used "
        f"(installed: {_has_numba()})"
    )
    peers = [
        ours(doc_ids, texts),
        bm25s_peer('bm25s, stopwords="en"', doc_ids, texts, our_tokens=False),
        bm25s_peer("bm25s, our tokenizer", doc_ids, texts, our_tokens=True),
    ]
    measure(peers, queries, depths, args, session)
    n = len(queries)
    qps = "{:,.0f}"
    print("index build, cold, seconds:")
    for peer in peers:
        print(f"  {peer.name:<24} {Figure.of(peer.build_s).text('{:.3f}', 's')}")
    for d in depths:
        print(f"top {d}, queries/s (warm: one at a time; batch: all {n} in one call):")
        for peer in peers:
            batch = peer.batch_qps(d, n)
            print(
                f"  {peer.name:<24} loop {peer.warm_qps(d, n).text(qps)}"
                + (f"; batch {batch.text(qps)}" if batch is not None else "")
                + f"; cold pass {peer.cold_qps[d]:,.0f}"
            )
    ndcg = {peer.name: mean_ndcg(peer.rankings[max(depths)], qrels) for peer in peers}
    print("nDCG@10: " + ", ".join(f"{name} {value:.4f}" for name, value in ndcg.items()))
    mine = peers[0]
    times = "{:.2f}x"
    for peer in peers[1:]:
        print(f"ours / {peer.name} (per round, then median [range]):")
        for d in depths:
            loop = ratio(Figure.of(peer.loop_s[d]), Figure.of(mine.loop_s[d]))
            line = f"  top {d} queries/s: {loop.text(times)} its loop"
            if d in peer.batch_s:
                batch = ratio(Figure.of(peer.batch_s[d]), Figure.of(mine.loop_s[d]))
                line += f", {batch.text(times)} its batch call"
            print(line)
        build = ratio(Figure.of(peer.build_s), Figure.of(mine.build_s))
        print(f"  build: {build.text(times)} as fast")
    session.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
