"""BM25 on SciFact: our index against the peer `bm25s`, measured in the same run.

Usage: python benchmarks/bench_bm25.py [PATH_TO_SCIFACT] [--repeat N]

Prints index build seconds, queries/s (single-query loop, the agent's pattern, and a
batch call where offered) and nDCG@10 over the 300 test claims (gain = qrel score,
ideal over min(10, |relevant|)). bm25s runs with k1=1.2, b=0.75 (method "lucene", the
same IDF as ours) twice: fed our tokenizer (like for like) and with its own default
tokenizer (regex words, English stopwords, no stemmer). Build times include tokenising.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import bm25s
import numpy as np

from brain_pipeline.retrieval.bm25 import BM25Index
from brain_pipeline.retrieval.text import clear_memo, tokenize

K = 10
DEFAULT_PATH = Path(__file__).resolve().parent.parent / ".." / "shared" / "datasets" / "scifact"

Ranker = Callable[[str], list[str]]


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


def ndcg_at_k(ranked: Sequence[str], relevant: dict[str, float], k: int = K) -> float:
    dcg = sum(relevant.get(doc, 0.0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal_gains = sorted(relevant.values(), reverse=True)[:k]
    ideal = sum(gain / math.log2(i + 2) for i, gain in enumerate(ideal_gains))
    return dcg / ideal if ideal > 0 else 0.0


def mean_ndcg(rankings: dict[str, list[str]], qrels: dict[str, dict[str, float]]) -> float:
    return float(np.mean([ndcg_at_k(rankings[q], qrels[q]) for q in qrels]))


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    """Best wall time over `repeat` runs, and the last result."""
    best, result = math.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def report(name: str, build_s: float, qps: float, batch_qps: float | None, ndcg: float) -> None:
    batch = f"{batch_qps:10.0f}" if batch_qps is not None else f"{'-':>10}"
    print(f"{name:<28} {build_s:9.3f} {qps:12.0f} {batch} {ndcg:9.4f}")


def bench_ours(
    doc_ids: list[str],
    texts: list[str],
    queries: list[tuple[str, str]],
    qrels: dict[str, dict[str, float]],
    repeat: int,
) -> None:
    def build() -> BM25Index:
        clear_memo()  # time a cold build: no words remembered from an earlier run
        return BM25Index.build(doc_ids, texts)

    build_s, index = timed(build, repeat)
    assert isinstance(index, BM25Index)

    def run() -> dict[str, list[str]]:
        return {qid: [d for d, _ in index.search(text, K)] for qid, text in queries}

    loop_s, rankings = timed(run, repeat)
    assert isinstance(rankings, dict)
    report("ours", build_s, len(queries) / loop_s, None, mean_ndcg(rankings, qrels))


def bench_bm25s(
    label: str,
    doc_ids: list[str],
    texts: list[str],
    queries: list[tuple[str, str]],
    qrels: dict[str, dict[str, float]],
    repeat: int,
    our_tokens: bool,
) -> None:
    def corpus_tokens() -> object:
        if our_tokens:
            clear_memo()
            return [tokenize(t) for t in texts]
        return bm25s.tokenize(texts, show_progress=False)

    def build() -> bm25s.BM25:
        retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        retriever.index(corpus_tokens(), show_progress=False)
        return retriever

    build_s, retriever = timed(build, repeat)
    assert isinstance(retriever, bm25s.BM25)
    vocab = retriever.vocab_dict

    def query_tokens(text: str) -> list[str]:
        if our_tokens:
            words = list(dict.fromkeys(tokenize(text)))  # the agent de-duplicates
        else:
            words = bm25s.tokenize([text], show_progress=False, return_ids=False)[0]
        return [w for w in words if w in vocab] or [""]  # bm25s rejects unknown tokens

    def one(text: str) -> list[str]:
        docs, scores = retriever.retrieve([query_tokens(text)], k=K, show_progress=False)
        return [doc_ids[i] for i, s in zip(docs[0], scores[0], strict=True) if s > 0]

    def loop() -> dict[str, list[str]]:
        return {qid: one(text) for qid, text in queries}

    def batch() -> dict[str, list[str]]:
        tokens = [query_tokens(text) for _, text in queries]
        docs, scores = retriever.retrieve(tokens, k=K, show_progress=False)
        return {
            qid: [doc_ids[i] for i, s in zip(docs[row], scores[row], strict=True) if s > 0]
            for row, (qid, _) in enumerate(queries)
        }

    loop_s, rankings = timed(loop, repeat)
    batch_s, batch_rankings = timed(batch, repeat)
    assert isinstance(rankings, dict) and isinstance(batch_rankings, dict)
    report(
        label, build_s, len(queries) / loop_s, len(queries) / batch_s, mean_ndcg(rankings, qrels)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs (default 3)")
    args = parser.parse_args()
    logging.getLogger("bm25s").setLevel(logging.ERROR)

    corpus = load_jsonl(args.path / "corpus.jsonl")
    qrels = load_qrels(args.path / "qrels.tsv")
    queries = [(q["_id"], q["text"]) for q in load_jsonl(args.path / "queries.jsonl")]
    queries = [(qid, text) for qid, text in queries if qid in qrels]
    doc_ids = [doc["_id"] for doc in corpus]
    texts = [doc["title"] + " " + doc["text"] for doc in corpus]

    print(
        f"SciFact: {len(doc_ids)} documents, {len(queries)} test queries; "
        f"bm25s {bm25s.__version__}; best of {args.repeat}"
    )
    print(f"{'':<28} {'build s':>9} {'q/s (loop)':>12} {'q/s batch':>10} {'nDCG@10':>9}")
    bench_ours(doc_ids, texts, queries, qrels, args.repeat)
    bench_bm25s("bm25s, our tokenizer", doc_ids, texts, queries, qrels, args.repeat, True)
    bench_bm25s("bm25s, default tokenizer", doc_ids, texts, queries, qrels, args.repeat, False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
