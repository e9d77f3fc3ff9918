"""Local ONNX embedding throughput and memory, next to the bare model in the same run.

Usage: python benchmarks/bench_local_embed.py [--n 1000] [--scifact PATH] [--batch 16]
                                             [--synthetic] [--runs 5]

Texts: the first N SciFact documents (title + abstract, ~240 tokens: most hit the
256-token cut) when the dataset is present and --synthetic is not given, else synthetic
paragraphs of 20-180 words. On 2 cores the model manages ~10 texts/s at 256 tokens, so
the default N is 1,000 (--n 5000 takes ~10 minutes per stage on SciFact).
Three figures, one process. A first pass runs the three stages in order (it warms the
model and prints the peak RSS after each stage); then `--runs` rounds (default 5) in
which they take turns give each stage's texts/s as median [min-max], and the ratio of
the embedder to the raw model per round (benchmarks/_figures.py; a reference unit timed
between the rounds states the machine's speed):
  raw model    tokenise everything first (not timed), then only session.run over
               fixed-size batches of --batch texts in corpus order (no sorting, no pooling)
  embedder     LocalEmbedder.embed_documents (tokenise, length-sorted batches, pooling)
  build        build_embeddings into a temporary embeddings.bin (adds quantising and
               the per-batch fsync'd checkpoint)
Peak RSS (ru_maxrss) is printed after each stage; goal < 1.5 GB and the embedder close
to the raw model.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _figures import DEFAULT_RUNS, Session, ratio

from brain_pipeline.corpus.store import Chunk, chunk_id
from brain_pipeline.embedding.builder import build_embeddings
from brain_pipeline.embedding.local import LocalEmbedder

DEFAULT_SCIFACT = Path(__file__).resolve().parent.parent / ".." / "shared" / "datasets" / "scifact"
VOCABULARY = (
    "the pipeline store chunk vector model query agent retrieval index corpus area heading "
    "paragraph embedding quota batch checkpoint window service request latency memory "
    "tokenizer evaluation fixture recall ranking teacher student lesson roadmap topic "
    "example function database network security design pattern testing"
)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def load_texts(n: int, scifact: Path) -> tuple[list[str], str]:
    corpus = scifact / "corpus.jsonl"
    if corpus.is_file():
        texts = []
        with corpus.open(encoding="utf-8") as handle:
            for line in handle:
                doc = json.loads(line)
                texts.append(f"{doc.get('title', '')}\n{doc.get('text', '')}".strip())
                if len(texts) == n:
                    break
        return texts, f"SciFact ({corpus})"
    rng = random.Random(42)
    words = VOCABULARY.split()
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(20, 180))) + "."
             for _ in range(n)]
    return texts, "synthetic paragraphs"


def raw_model(embedder: LocalEmbedder, texts: list[str], batch: int) -> float:
    """Seconds spent in session.run alone over fixed-size batches in corpus order."""
    embedder._load()
    tokenizer, session = embedder._tokenizer, embedder._session
    feeds = []
    for start in range(0, len(texts), batch):
        encodings = tokenizer.encode_batch(texts[start : start + batch])
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
        mask = (ids != 0).astype(np.int64)
        feeds.append({"input_ids": ids, "attention_mask": mask,
                      "token_type_ids": np.zeros_like(ids)})
    started = time.perf_counter()
    for feed in feeds:
        session.run(None, feed)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--scifact", type=Path, default=DEFAULT_SCIFACT)
    parser.add_argument("--synthetic", action="store_true", help="ignore SciFact")
    parser.add_argument("--batch", type=int, default=16, help="raw model batch size")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="timed rounds (median)")
    args = parser.parse_args()
    session = Session(runs=args.runs).start()

    texts, origin = load_texts(args.n, Path("/nonexistent") if args.synthetic else args.scifact)
    embedder = LocalEmbedder()
    tokens = [sum(e.attention_mask) for e in _encodings(embedder, texts)]
    print(f"{len(texts)} texts from {origin}; tokens/text mean {np.mean(tokens):.0f}, "
          f"{100 * np.mean(np.asarray(tokens) >= 256):.0f}% truncated at 256; "
          f"{embedder.threads} threads; raw batch {args.batch}, ours <= "
          f"{embedder.max_batch_tokens} tokens per batch")
    print(f"after model load:  peak RSS {peak_rss_mb():7.0f} MB")
    chunks = [Chunk(id=chunk_id(t), content=t, area="bench", source="bench/x") for t in texts]

    def embed() -> float:
        started = time.perf_counter()
        vectors = embedder.embed_documents(texts)
        seconds = time.perf_counter() - started
        assert vectors.shape == (len(texts), 384)
        return seconds

    def build() -> float:
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            report = build_embeddings(chunks, Path(tmp) / "embeddings.bin", embedder)
            seconds = time.perf_counter() - started
        assert report.embedded == len(texts)
        return seconds

    stages = {"raw model": lambda: raw_model(embedder, texts, args.batch),
              "embedder": embed, "build_embeddings": build}
    for name, stage in stages.items():  # the first pass: warm-up and peak RSS per stage
        seconds = stage()
        print(f"{name:<17} first pass {len(texts) / seconds:8.1f} texts/s; "
              f"peak RSS {peak_rss_mb():7.0f} MB")
    figures = session.rounds(stages, measure=lambda stage: float(stage()))  # type: ignore[arg-type]
    for name, seconds in figures.items():
        print(f"{name:<17} {seconds.map(lambda s: len(texts) / s).text('{:.1f}', 'texts/s')}")
    print(f"embedder / raw model speed, per round: "
          f"{ratio(figures['raw model'], figures['embedder']).text('{:.2f}')} "
          "(1.00 = as fast as the bare model)")
    session.finish()


def _encodings(embedder: LocalEmbedder, texts: list[str]) -> list[Any]:
    embedder._load()
    return list(embedder._tokenizer.encode_batch(texts))


if __name__ == "__main__":
    main()
