"""Benchmark retrieval on a BEIR-layout collection (SciFact and friends).

Layout: `corpus.jsonl` ({"_id", "title", "text"}), a queries file ({"_id", "text"}) and
a qrels TSV (header, then query-id, corpus-id, score). Each document is indexed as
`title + " " + text`, the convention behind published figures. Only queries with at
least one positive judgment are evaluated.

Dense and hybrid runs go through the same `Retriever` the agent semantics define, over
chunks whose id is `chunk_id(document)`, with vectors built (and cached, incrementally)
by the ordinary embedding builder, so a second run re-embeds nothing. Identical
documents share one chunk; its hits are expanded back to every BEIR id it stands for.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from brain_pipeline.corpus.store import Chunk, chunk_id
from brain_pipeline.evaluation.metrics import BeirScores, beir_scores
from brain_pipeline.retrieval.bm25 import BM25Index
from brain_pipeline.retrieval.hybrid import Retriever
from brain_pipeline.retrieval.vectors import EmbeddingStore

MODES = ("lexical", "hybrid", "dense")
DEPTH = 100
"""Ranking depth kept per query (Recall@100 needs it)."""
WARM_PASSES = 3
"""Timed passes over the queries after a warm-up pass (lexical `bench`)."""
AGENT_LIMIT = 10
"""The agent asks for 10 passages; hybrid pools are 3 × that, which the @10 figures keep."""


class BeirFormatError(ValueError):
    """The directory is not a usable BEIR collection; the message names file and line."""


@dataclass(frozen=True)
class BeirDataset:
    """Documents, evaluated queries and their judgments, aligned by position."""

    name: str
    split: str
    doc_ids: list[str]
    documents: list[str]
    query_ids: list[str]
    queries: list[str]
    qrels: list[dict[str, float]]


def _read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    rows: list[tuple[int, dict[str, Any]]] = []
    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BeirFormatError(f"{path}:{lineno}: not valid JSON: {exc.msg}") from exc
            if not isinstance(row, dict) or not isinstance(row.get("_id"), str):
                raise BeirFormatError(f"{path}:{lineno}: expected an object with a string '_id'")
            rows.append((lineno, row))
    return rows


def _text_field(row: dict[str, Any], key: str, where: str) -> str:
    value = row.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BeirFormatError(f"{where}: {key!r} must be a string")
    return value


def _first_existing(directory: Path, names: Sequence[str], what: str) -> Path:
    for name in names:
        candidate = directory / name
        if candidate.is_file():
            return candidate
    raise BeirFormatError(f"{directory}: no {what} file; looked for {', '.join(names)}")


def _read_qrels(path: Path) -> dict[str, dict[str, float]]:
    qrels: dict[str, dict[str, float]] = {}
    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            fields = line.rstrip("\r\n").split("\t")
            if lineno == 1 and fields[0].strip().lower() in ("query-id", "query_id", "qid"):
                continue
            if not line.strip():
                continue
            if len(fields) != 3:
                raise BeirFormatError(
                    f"{path}:{lineno}: expected query-id<TAB>corpus-id<TAB>score, "
                    f"got {len(fields)} field(s)"
                )
            qid, doc_id, raw_score = (f.strip() for f in fields)
            try:
                score = float(raw_score)
            except ValueError as exc:
                raise BeirFormatError(
                    f"{path}:{lineno}: score {raw_score!r} is not a number"
                ) from exc
            qrels.setdefault(qid, {})[doc_id] = score
    return qrels


def load_beir(directory: Path | str, split: str = "test") -> BeirDataset:
    """Load a BEIR collection; `split` picks queries_<split>.jsonl and the qrels file.

    Qrels are looked for as qrels/<split>.tsv, qrels_<split>.tsv, then (for "test")
    qrels.tsv; queries as queries_<split>.jsonl, then queries.jsonl.
    """
    root = Path(directory)
    if not root.is_dir():
        raise BeirFormatError(f"{root}: not a directory")
    corpus_path = _first_existing(root, ["corpus.jsonl"], "corpus")
    qrels_names = [f"qrels/{split}.tsv", f"qrels_{split}.tsv"]
    if split == "test":
        qrels_names.append("qrels.tsv")
    qrels_path = _first_existing(root, qrels_names, f"qrels for split {split!r}")
    queries_path = _first_existing(root, [f"queries_{split}.jsonl", "queries.jsonl"], "queries")

    doc_ids: list[str] = []
    documents: list[str] = []
    seen: set[str] = set()
    for lineno, row in _read_jsonl(corpus_path):
        where = f"{corpus_path}:{lineno}"
        if row["_id"] in seen:
            raise BeirFormatError(f"{where}: duplicate document id {row['_id']!r}")
        seen.add(row["_id"])
        doc_ids.append(row["_id"])
        documents.append(_text_field(row, "title", where) + " " + _text_field(row, "text", where))

    texts = {
        row["_id"]: _text_field(row, "text", f"{queries_path}:{lineno}")
        for lineno, row in _read_jsonl(queries_path)
    }
    qrels = _read_qrels(qrels_path)
    judged = [qid for qid, docs in qrels.items() if any(score > 0 for score in docs.values())]
    missing = [qid for qid in judged if qid not in texts]
    if missing:
        raise BeirFormatError(
            f"{qrels_path}: {len(missing)} judged query id(s) absent from {queries_path.name}, "
            f"e.g. {', '.join(missing[:5])}"
        )
    order = [qid for qid in texts if qid in set(judged)]
    return BeirDataset(
        name=root.resolve().name,
        split=split,
        doc_ids=doc_ids,
        documents=documents,
        query_ids=order,
        queries=[texts[qid] for qid in order],
        qrels=[qrels[qid] for qid in order],
    )


def document_chunks(dataset: BeirDataset) -> tuple[list[Chunk], dict[str, list[str]]]:
    """One chunk per distinct document text (area = dataset name), and chunk id -> doc ids."""
    chunks: list[Chunk] = []
    docs_of: dict[str, list[str]] = {}
    for doc_id, text in zip(dataset.doc_ids, dataset.documents, strict=True):
        cid = chunk_id(text)
        if cid not in docs_of:
            docs_of[cid] = []
            chunks.append(Chunk(id=cid, content=text, area=dataset.name, source=doc_id))
        docs_of[cid].append(doc_id)
    return chunks, docs_of


@dataclass(frozen=True)
class BenchResult:
    """Quality and speed of one mode on one split."""

    dataset: str
    split: str
    mode: str
    documents: int
    queries: int
    ndcg_at_10: float
    recall_at_10: float
    recall_at_100: float
    mrr_at_10: float
    build_seconds: float
    """Index construction (BM25, and the vector pool for dense/hybrid); not embedding."""
    queries_per_second: float
    """Lexical: warm, the median of `WARM_PASSES` passes after a warm-up pass. Dense and
    hybrid: the pass that produced the @10 figures, query embedding included."""
    embed_seconds: float = 0.0
    embedded_documents: int = 0
    """Documents embedded by this run (0 when every vector came from the cache)."""
    model: str | None = None
    fallback: str | None = None
    """Why (some) queries were answered lexically instead; None when none were."""
    timing: str = "one pass"
    """How `queries_per_second` was measured (printed beside it)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_text(self) -> str:
        lines = [
            f"{self.dataset} ({self.split}): {self.queries} queries, {self.documents} documents, "
            f"mode {self.mode}" + (f", model {self.model}" if self.model else ""),
            f"nDCG@10      {self.ndcg_at_10:.4f}",
            f"Recall@10    {self.recall_at_10:.4f}",
            f"Recall@100   {self.recall_at_100:.4f}",
            f"MRR@10       {self.mrr_at_10:.4f}",
            f"build        {self.build_seconds:.2f} s",
            f"queries/s    {self.queries_per_second:.1f} ({self.timing})",
        ]
        if self.mode != "lexical":
            lines.append(
                f"embedding    {self.embedded_documents} document(s) embedded "
                f"in {self.embed_seconds:.1f} s"
            )
        if self.fallback:
            lines.append(f"fallback     {self.fallback}")
        return "\n".join(lines)


def _result(
    dataset: BeirDataset,
    mode: str,
    scores: BeirScores,
    build_seconds: float,
    query_seconds: float,
    **extra: Any,
) -> BenchResult:
    n = len(dataset.queries)
    return BenchResult(
        dataset=dataset.name,
        split=dataset.split,
        mode=mode,
        documents=len(dataset.doc_ids),
        queries=n,
        ndcg_at_10=scores.ndcg_at_10,
        recall_at_10=scores.recall_at_10,
        recall_at_100=scores.recall_at_100,
        mrr_at_10=scores.mrr_at_10,
        build_seconds=build_seconds,
        queries_per_second=n / query_seconds if query_seconds > 0 else float("inf"),
        **extra,
    )


def bench_lexical(dataset: BeirDataset) -> BenchResult:
    """BM25 over every document (duplicates included, as published runs index them)."""
    started = time.perf_counter()
    index = BM25Index.build(dataset.doc_ids, dataset.documents)
    build_seconds = time.perf_counter() - started
    # The warm-up pass gives the rankings; the timed passes give the same ones again.
    rankings = [[doc for doc, _ in index.search(q, DEPTH)] for q in dataset.queries]
    passes = []
    for _ in range(WARM_PASSES):
        started = time.perf_counter()
        for q in dataset.queries:
            index.search(q, DEPTH)
        passes.append(time.perf_counter() - started)
    return _result(
        dataset,
        "lexical",
        beir_scores(rankings, dataset.qrels),
        build_seconds,
        statistics.median(passes),
        timing=f"warm: median of {WARM_PASSES} passes after a warm-up pass, top {DEPTH}",
    )


def _expand(chunk_ids: Sequence[str], docs_of: dict[str, list[str]], depth: int) -> list[str]:
    """Chunk ranking -> BEIR doc ranking; identical documents share their chunk's rank."""
    ranking = [doc for cid in chunk_ids for doc in docs_of[cid]]
    return ranking[:depth]


def bench_vectors(
    dataset: BeirDataset,
    mode: str,
    embeddings: EmbeddingStore,
    query_embedder: Callable[[str], Any],
    query_model: str | None,
    docs_of: dict[str, list[str]],
    chunks: Sequence[Chunk],
) -> BenchResult:
    """Dense or hybrid through the agent's Retriever over already-built document vectors.

    Hybrid's @10 figures come from limit-10 searches (pools of 30, what the agent does);
    Recall@100 from a second, limit-100 pass. Dense rankings are prefix-stable, so one
    limit-100 pass serves both.
    """
    area = dataset.name
    query_embedder("warm-up")  # load the model outside the timings: it is not an index
    started = time.perf_counter()
    retriever = Retriever(chunks, embeddings, query_embedder, query_model=query_model)
    retriever.search("index warm-up", area, limit=1, mode=mode)  # builds BM25 and vector pool
    build_seconds = time.perf_counter() - started

    fallbacks: Counter[str] = Counter()
    first_limit = AGENT_LIMIT if mode == "hybrid" else DEPTH
    started = time.perf_counter()
    first_pass = []
    for query in dataset.queries:
        answer = retriever.search(query, area, limit=first_limit, mode=mode)
        if answer.fallback:
            fallbacks[answer.fallback] += 1
        first_pass.append(_expand([h.chunk.id for h in answer.hits], docs_of, first_limit))
    query_seconds = time.perf_counter() - started
    if mode == "hybrid":
        deep = [
            _expand(
                [h.chunk.id for h in retriever.search(q, area, limit=DEPTH, mode=mode).hits],
                docs_of,
                DEPTH,
            )
            for q in dataset.queries
        ]
        # @10 figures from the agent-sized pass, Recall@100 from the deep one.
        top = beir_scores(first_pass, dataset.qrels)
        scores = BeirScores(
            ndcg_at_10=top.ndcg_at_10,
            recall_at_10=top.recall_at_10,
            recall_at_100=beir_scores(deep, dataset.qrels).recall_at_100,
            mrr_at_10=top.mrr_at_10,
            n_queries=top.n_queries,
        )
    else:
        scores = beir_scores(first_pass, dataset.qrels)
    fallback = (
        "; ".join(f"{r}: {c}/{len(dataset.queries)}" for r, c in fallbacks.most_common())
        if fallbacks
        else None
    )
    return _result(
        dataset,
        mode,
        scores,
        build_seconds,
        query_seconds,
        model=embeddings.model,
        fallback=fallback,
        timing=f"one pass, top {first_limit}, query embedding included",
    )


def run_bench(
    dataset: BeirDataset,
    mode: str = "lexical",
    *,
    embedder: Any = None,
    cache_path: Path | str | None = None,
    progress: Callable[[int, int], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> BenchResult:
    """Benchmark one mode. Dense/hybrid need an `Embedder` and a cache file for vectors.

    Document vectors are built with the project's incremental builder into `cache_path`
    (PATBEMB1), so only documents not yet embedded by this model are sent to it.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "lexical":
        return bench_lexical(dataset)
    if embedder is None or cache_path is None:
        raise ValueError(f"mode {mode!r} needs an embedder and a cache path for the vectors")
    from brain_pipeline.embedding.builder import build_embeddings
    from brain_pipeline.retrieval.vectors import decode_embeddings

    chunks, docs_of = document_chunks(dataset)
    target = Path(cache_path)
    started = time.perf_counter()
    report = build_embeddings(chunks, target, embedder, progress=progress, log=log)
    embed_seconds = time.perf_counter() - started
    embeddings = decode_embeddings(target.read_bytes())
    result = bench_vectors(
        dataset, mode, embeddings, embedder.embed_query, embedder.name, docs_of, chunks
    )
    return replace(result, embed_seconds=embed_seconds, embedded_documents=report.embedded)
